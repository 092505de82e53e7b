import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a (batch, height, width) tensor; the spatial sizes are
    written `height = width = 16`, as 15 of KernelBench's 100 Level 2 problems write theirs."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 4
height = width = 16


def get_inputs():
    return [torch.randn(batch_size, height, width)]


def get_init_inputs():
    return []
