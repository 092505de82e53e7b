import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Convolution, SiLU and a learned per-channel scale (a "layer scale").

    Parameters
    ----------
    in_channels : int
    out_channels : int
    kernel_size : int
    """

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.gamma = nn.Parameter(torch.full((out_channels, 1, 1), 0.1) + 0.01 * torch.randn(out_channels, 1, 1))

    def forward(self, x):
        y = self.conv(x)
        y = y * y.sigmoid()
        return y * self.gamma


batch_size = 8
in_channels = 64
out_channels = 64
height = width = 112
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
