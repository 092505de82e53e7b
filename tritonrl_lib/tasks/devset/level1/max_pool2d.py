import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 128
width = 128
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    """2-D max pooling.

    Args:
        kernel_size (int): window size.
        stride (int): window stride.
        padding (int): implicit negative-infinity padding on each side.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
