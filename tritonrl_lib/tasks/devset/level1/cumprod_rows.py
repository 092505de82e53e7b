import torch
import torch.nn as nn


class Model(nn.Module):
    """Running product along the last dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumprod(x, dim=-1)


batch_size = 512
length = 1024


def get_inputs():
    # factors near 1 so the running products neither vanish nor overflow
    return [1.0 + 0.05 * torch.randn(batch_size, length)]


def get_init_inputs():
    return []
