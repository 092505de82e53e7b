import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Inclusive prefix sum (cumulative sum) along one dimension.
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
            torch.Tensor: running sums along `scan_dim`, same shape.
        """
        return torch.cumsum(x, dim=self.scan_dim)


batch_size = 512
length = 16384
scan_dim = 0


def get_inputs():
    x = torch.randn(batch_size, length, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [scan_dim]
