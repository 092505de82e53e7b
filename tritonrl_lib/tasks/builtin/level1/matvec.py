import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix-vector product: y = A @ x with x given as a (K, 1) column.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): shape (M, K).
            x (torch.Tensor): shape (K, 1).

        Returns:
            torch.Tensor: A @ x, shape (M, 1).
        """
        return torch.matmul(A, x)


M = 8192
K = 8192


def get_inputs():
    A = torch.randn(M, K)
    x = torch.randn(K, 1)
    return [A, x]


def get_init_inputs():
    return []
