import torch
import torch.nn as nn
import torch.nn.functional as F

DIVISOR = 3.0
SLOPE = 0.2


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x) / DIVISOR
        x = F.leaky_relu(x, SLOPE)
        return torch.tanh(x)


batch_size = 64
in_channels = 8
out_channels = 16
height = 96
width = 96
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
