import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A 2D convolution, HardSwish, global average pooling over the spatial dims, then a learned
    per-channel scale: one feature vector per sample.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.scale = nn.Parameter(torch.ones(out_channels) + 0.1 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: mean(hardswish(conv(x)), dim=[2, 3]) * scale, shape (batch_size, out_channels).
        """
        x = self.conv(x)
        x = F.hardswish(x)
        x = torch.mean(x, dim=[2, 3])
        x = x * self.scale
        return x


batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
stride = 1
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
