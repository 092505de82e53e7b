import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of each row of centred (zero-mean) data: the outputs are about 1 / sqrt(dim), below an
    absolute tolerance of 1e-2."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


batch_size = 2
dim = 1048576


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
