import torch
import torch.nn as nn


class Model(nn.Module):
    """
    HardTanh: clamps every element into [min_val, max_val].
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim).

        Returns:
            torch.Tensor: x clamped into [min_val, max_val], same shape and dtype as x.
        """
        return torch.nn.functional.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


batch_size = 2048
dim = 16384
min_val = -0.5
max_val = 2.0


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [min_val, max_val]
