import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums each row; the row length is derived from another constant (`dim = base * 3`)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


batch_size = 16
base = 32
dim = base * 3


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
