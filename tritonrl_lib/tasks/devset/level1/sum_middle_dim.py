import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums a 3-D tensor over one dimension, keeping it.

    Args:
        dim (int): the dimension to reduce.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch, rows, cols).

        Returns:
            The sum over `dim`, with that dimension kept as size 1.
        """
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 64
rows = 512
cols = 1024
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, rows, cols)]


def get_init_inputs():
    return [reduce_dim]
