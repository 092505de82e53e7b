import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, AvgPool2d, ReLU (shrunk L2-style fusion)."""

    def __init__(self, in_channels, out_channels, kernel_size, pool):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.pool = nn.AvgPool2d(pool)

    def forward(self, x):
        return torch.relu(self.pool(self.conv(x)))


batch_size = 2
in_channels = 3
out_channels = 8
height = width = 18
kernel_size = 3
pool = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool]
