import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A 3D convolution, softmax over the channels, then a learned per-channel multiplier.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, multiplier_shape: tuple):
        """
        Args:
            multiplier_shape (tuple): shape of the per-channel multiplier, (out_channels, 1, 1, 1).
        """
        super(Model, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, depth, height, width).

        Returns:
            torch.Tensor: softmax(conv(x), dim=1) * multiplier, shaped like the convolution's output.
        """
        x = self.conv(x)
        x = torch.softmax(x, dim=1)
        x = x * self.multiplier
        return x


batch_size = 16
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 3
multiplier_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, multiplier_shape]
