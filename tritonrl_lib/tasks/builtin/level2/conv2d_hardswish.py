import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A 2D convolution followed by hard swish.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: hardswish(conv(x)), shape (batch_size, out_channels, out_height, out_width).
        """
        x = self.conv(x)
        x = F.hardswish(x)
        return x


batch_size = 32
in_channels = 64
out_channels = 64
height = 256
width = 256
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
