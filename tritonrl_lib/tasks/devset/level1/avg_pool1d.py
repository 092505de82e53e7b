import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, kernel_size, stride):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride

    def forward(self, signal):
        return F.avg_pool1d(signal, kernel_size=self.kernel_size, stride=self.stride)


batch_size = 64
in_channels = 128
length = 4096


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [4, 2]
