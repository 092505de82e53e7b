import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for A (M, K) and B (K, N), inputs drawn in [0, 1) as KernelBench draws its matmuls'."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 64
K = 1024
N = 48


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
