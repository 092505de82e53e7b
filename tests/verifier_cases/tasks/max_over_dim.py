import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench L1/49 Max_reduction_over_a_dimension, shrunk."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim)[0]


batch_size = 4
dim1 = 256
dim2 = 15


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]
