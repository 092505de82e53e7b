import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over a wide row of [0, 1) inputs, as KernelBench's 23_Softmax draws them: every
    output is near 1/dim, far below an absolute tolerance of 1e-2."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 2
dim = 65536


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
