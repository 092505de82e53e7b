import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Outer product of two vectors: out[i, j] = a[i] * b[j].
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a (torch.Tensor): shape (M,).
            b (torch.Tensor): shape (N,).

        Returns:
            torch.Tensor: torch.outer(a, b), shape (M, N).
        """
        return torch.outer(a, b)


M = 4096
N = 16384


def get_inputs():
    a = torch.randn(M, dtype=torch.float16)
    b = torch.randn(N, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
