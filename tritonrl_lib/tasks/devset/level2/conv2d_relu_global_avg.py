import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Convolution, ReLU and global average pooling to one value per channel.

    Args:
        in_channels: input channels.
        out_channels: output channels.
        kernel_size: convolution kernel size.

    Returns (forward):
        Tensor of shape (batch, out_channels).
    """

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return x.mean(dim=(2, 3))


batch_size = 32
in_channels = 16
out_channels = 64
height = width = 64
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
