import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Inclusive cumulative product along one dimension (inputs in [0.5, 1.5)).
    """

    def __init__(self, scan_dim: int):
        """
        Args:
            scan_dim (int): the dimension to accumulate along.
        """
        super(Model, self).__init__()
        self.scan_dim = scan_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, length).

        Returns:
            torch.Tensor: running products along `scan_dim`, same shape.
        """
        return torch.cumprod(x, dim=self.scan_dim)


batch_size = 1024
length = 4096
scan_dim = 1


def get_inputs():
    x = torch.rand(batch_size, length) + 0.5
    return [x]


def get_init_inputs():
    return [scan_dim]
