import torch
import torch.nn as nn


class Model(nn.Module):
    """L2 normalisation of each row (KernelBench's 39_L2Norm_ with its [0, 1) inputs): every output
    is below 1 / sqrt(dim / 3), smaller than an absolute tolerance of 1e-2 even at a shrunk size."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


batch_size = 2
dim = 524288


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
