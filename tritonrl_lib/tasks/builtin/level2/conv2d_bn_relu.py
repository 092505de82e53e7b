import torch
import torch.nn as nn


class Model(nn.Module):
    """
    The classic convolution block: Conv2d, BatchNorm2d, ReLU.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: relu(bn(conv(x))), shape (batch_size, out_channels, out_height, out_width).
        """
        x = self.conv(x)
        x = self.bn(x)
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
