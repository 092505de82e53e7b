import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix sum along a dimension.

    Args:
        dim: the dimension to scan.
    """

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


batch_size = 128
length = 32768
dim = 1


def get_inputs():
    return [torch.rand(batch_size, length)]


def get_init_inputs():
    return [dim]
