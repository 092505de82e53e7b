import torch
import torch.nn as nn


class Model(nn.Module):
    """A bool mask: x > threshold. In float16 the threshold itself rounds (0.3 -> 0.30005), so a kernel
    that compares in float32 differs from the half reference wherever an input is that half value."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x > self.threshold


batch_size = 64
dim = 4000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.3]
