import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise absolute difference |a - b| of two image batches."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.abs(a - b)


batch = 8
H, W = 1024, 1024


def get_inputs():
    a = torch.rand(batch, H, W)
    b = torch.rand(batch, H, W)
    return [a, b]


def get_init_inputs():
    return []
