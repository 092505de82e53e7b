import torch
import torch.nn as nn

batch_size = 32
in_channels = 3
out_channels = 64
height, width = 128, 128
kernel_size = 3
scale = 0.5


class Model(nn.Module):
    """3x3 convolution without its own bias, then a learned per-channel bias, ReLU and a
    fixed output scale.

    Args:
        in_channels (int): channels of the input image.
        out_channels (int): channels produced by the convolution.
        kernel_size (int): square kernel size (padding keeps the spatial size).
        scale (float): multiplier applied last.
    """

    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x):
        x = self.conv(x)
        x = x + self.bias
        x = torch.relu(x)
        return x * self.scale


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
