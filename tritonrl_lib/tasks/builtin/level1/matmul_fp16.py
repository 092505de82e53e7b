import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplies two square matrices: C = A @ B.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): matrix of shape (N, N).
            B (torch.Tensor): matrix of shape (N, N).

        Returns:
            torch.Tensor: A @ B, shape (N, N).
        """
        return torch.matmul(A, B)


N = 3072


def get_inputs():
    A = torch.randn(N, N, dtype=torch.float16)
    B = torch.randn(N, N, dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return []
