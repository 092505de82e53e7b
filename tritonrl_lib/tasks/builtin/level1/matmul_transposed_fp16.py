import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication with the first operand stored transposed: C = A.T @ B.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): shape (K, M), used as its transpose.
            B (torch.Tensor): shape (K, N).

        Returns:
            torch.Tensor: A.T @ B, shape (M, N).
        """
        return torch.matmul(A.T, B)


M = 1024
K = 4096
N = 4096


def get_inputs():
    A = torch.randn(K, M, dtype=torch.float16)
    B = torch.randn(K, N, dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return []
