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


M = 2048
K = 4096
N = 2048


def get_inputs():
    A = torch.randn(K, M)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
