import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Product of a 3D tensor over one dimension (inputs near 1 keep the product finite).
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
            torch.Tensor: the product over `reduce_dim`; that dimension is removed.
        """
        return torch.prod(x, dim=self.reduce_dim)


batch_size = 128
dim1 = 64
dim2 = 4096
reduce_dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2) * 0.5 + 0.75
    return [x]


def get_init_inputs():
    return [reduce_dim]
