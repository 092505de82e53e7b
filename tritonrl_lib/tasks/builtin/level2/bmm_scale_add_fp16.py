import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Batched matrix multiplication, scaled, plus a third tensor: bmm(A, B) * scale + C.
    """

    def __init__(self, scale: float):
        """
        Args:
            scale (float): multiplier of the batched product.
        """
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): shape (batch_size, M, K).
            B (torch.Tensor): shape (batch_size, K, N).
            C (torch.Tensor): shape (batch_size, M, N).

        Returns:
            torch.Tensor: torch.bmm(A, B) * scale + C, shape (batch_size, M, N).
        """
        return torch.bmm(A, B) * self.scale + C


batch_size = 16
M = 512
K = 1024
N = 1024
scale = 0.25


def get_inputs():
    A = torch.randn(batch_size, M, K, dtype=torch.float16)
    B = torch.randn(batch_size, K, N, dtype=torch.float16)
    C = torch.randn(batch_size, M, N, dtype=torch.float16)
    return [A, B, C]


def get_init_inputs():
    return [scale]
