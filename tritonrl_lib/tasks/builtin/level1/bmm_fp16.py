import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Batched matrix multiplication: one (M, K) @ (K, N) product per batch entry.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): shape (batch_size, M, K).
            B (torch.Tensor): shape (batch_size, K, N).

        Returns:
            torch.Tensor: torch.bmm(A, B), shape (batch_size, M, N).
        """
        return torch.bmm(A, B)


batch_size = 16
M = 512
K = 1024
N = 1536


def get_inputs():
    A = torch.randn(batch_size, M, K, dtype=torch.float16)
    B = torch.randn(batch_size, K, N, dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return []
