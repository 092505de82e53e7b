import torch
import torch.nn as nn


class Model(nn.Module):
    """Every value doubled, at sizes published as multiples of 16 (issue 31: a kernel may rely on that
    divisibility; the tiny set made the feature dimension 12)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2


batch_size = 64
features = 96


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
