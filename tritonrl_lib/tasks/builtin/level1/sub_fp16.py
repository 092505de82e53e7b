import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Subtracts a per-row value from every element of its row (a (batch, 1) column broadcast).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, row_values: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, dim).
            row_values (torch.Tensor): shape (batch_size, 1).

        Returns:
            torch.Tensor: x - row_values, shape (batch_size, dim).
        """
        return x - row_values


batch_size = 2048
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    row_values = torch.randn(batch_size, 1, dtype=torch.float16)
    return [x, row_values]


def get_init_inputs():
    return []
