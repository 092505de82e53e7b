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


M = 4096
K = 16384


def get_inputs():
    A = torch.randn(M, K, dtype=torch.float16)
    x = torch.randn(K, 1, dtype=torch.float16)
    return [A, x]


def get_init_inputs():
    return []
