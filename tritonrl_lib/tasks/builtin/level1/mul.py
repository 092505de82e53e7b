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


batch_size = 4096
dim = 8192


def get_inputs():
    x = torch.randn(batch_size, dim)
    factors = torch.randn(dim)
    return [x, factors]


def get_init_inputs():
    return []
