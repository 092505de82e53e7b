import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication scaled by a constant: C = alpha * (A @ B).
    """

    def __init__(self, alpha: float):
        """
        Args:
            alpha (float): scale applied to the product.
        """
        super(Model, self).__init__()
        self.alpha = alpha

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): shape (M, K).
            B (torch.Tensor): shape (K, N).

        Returns:
            torch.Tensor: alpha * (A @ B), shape (M, N).
        """
        return torch.matmul(A, B) * self.alpha


M = 2048
K = 1024
N = 8192
alpha = 2.0


def get_inputs():
    A = torch.randn(M, K, dtype=torch.float16)
    B = torch.randn(K, N, dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return [alpha]
