import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Euclidean (L2) norm of a 3D tensor over one dimension.
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
            torch.Tensor: the L2 norm over `reduce_dim`; that dimension is removed.
        """
        return torch.norm(x, p=2, dim=self.reduce_dim)


batch_size = 16
dim1 = 1024
dim2 = 2048
reduce_dim = 0


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [reduce_dim]
