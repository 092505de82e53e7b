import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2D convolution, then a learned per-channel bias, then ReLU (a Level 2 fusion task)."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return torch.relu(x + self.bias)


batch_size = 4
in_channels = 3
out_channels = 8
height = 16
width = 16
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
