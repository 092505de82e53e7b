import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU over [0, 1) inputs, as KernelBench's 19_ReLU draws them: on these inputs ReLU is the
    identity, though the operation accepts any sign."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 256


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
