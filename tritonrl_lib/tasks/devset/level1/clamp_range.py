import torch
import torch.nn as nn

batch_size = 64
dim = 131072
min_val = -0.75
max_val = 0.75


class Model(nn.Module):
    """Clamps every element into [min_val, max_val]."""

    def __init__(self, min_val, max_val):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x):
        return torch.clamp(x, min=self.min_val, max=self.max_val)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [min_val, max_val]
