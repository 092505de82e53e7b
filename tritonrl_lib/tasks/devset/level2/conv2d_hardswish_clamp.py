import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride)

    def forward(self, x):
        x = self.conv(x)
        x = F.hardswish(x)
        # keep activations in a fixed range before quantization
        x = x.clamp(0.0, 2.0)
        return x


batch_size = 16
in_channels = 16
out_channels = 32
H = W = 128
kernel_size = 3
stride = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
