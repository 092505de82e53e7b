import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Fused multiply-add of three tensors, clamped into a range: clamp(x * y + z, min_val, max_val).
    """

    def __init__(self, min_val: float, max_val: float):
        """
        Args:
            min_val (float): lower bound.
            max_val (float): upper bound.
        """
        super(Model, self).__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x, y, z (torch.Tensor): each of shape (batch_size, dim).

        Returns:
            torch.Tensor: clamp(x * y + z, min_val, max_val).
        """
        out = x * y
        out = out + z
        return torch.clamp(out, min=self.min_val, max=self.max_val)


batch_size = 2048
dim = 16384
min_val = -0.75
max_val = 3.0


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16), torch.randn(batch_size, dim, dtype=torch.bfloat16), torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [min_val, max_val]
