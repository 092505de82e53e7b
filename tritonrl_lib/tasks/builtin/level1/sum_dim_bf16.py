import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Sums a 3D tensor over one dimension, removing that dimension.
    """

    def __init__(self, reduce_dim: int):
        """
        Args:
            reduce_dim (int): the dimension to reduce.
        """
        super(Model, self).__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim1, dim2).

        Returns:
            torch.Tensor: x summed over `reduce_dim`; that dimension is removed.
        """
        return torch.sum(x, dim=self.reduce_dim)


batch_size = 16
dim1 = 1024
dim2 = 2048
reduce_dim = 0


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [reduce_dim]
