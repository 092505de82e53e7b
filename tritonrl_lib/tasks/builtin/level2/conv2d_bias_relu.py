import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A 2D convolution, then a learned per-channel bias, then ReLU.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): images of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: relu(conv(x) + bias), shape (batch_size, out_channels, out_h, out_w).
        """
        x = self.conv(x)
        x = x + self.bias
        x = torch.relu(x)
        return x


batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
