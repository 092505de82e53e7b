import torch
import torch.nn as nn


class Model(nn.Module):
    """Min over a dimension of [0, 1) inputs (KernelBench's 53_Min_reduction_over_a_dimension): the
    minimum of many uniform draws is close to 0, below an absolute tolerance of 1e-2."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.min(x, dim=self.dim)[0]


batch_size = 4
features = 8192


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [1]
