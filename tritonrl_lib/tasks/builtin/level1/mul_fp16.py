import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplies every row of a matrix by a vector of per-column factors (broadcast multiply).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, dim).
            factors (torch.Tensor): shape (dim,), broadcast over the rows of x.

        Returns:
            torch.Tensor: x * factors, shape (batch_size, dim).
        """
        return x * factors


batch_size = 2048
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    factors = torch.randn(dim, dtype=torch.float16)
    return [x, factors]


def get_init_inputs():
    return []
