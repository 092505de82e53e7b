import torch
import torch.nn as nn


class Model(nn.Module):
    """Residual 1-D convolution block: x + GELU(conv1d(x)), 'same' padding.

    Args:
        channels (int): input and output channels.
        kernel_size (int): odd kernel width.
    """

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.conv(x))


batch_size = 32
channels = 128
seq_len = 4096
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, channels, seq_len)]


def get_init_inputs():
    return [channels, kernel_size]
