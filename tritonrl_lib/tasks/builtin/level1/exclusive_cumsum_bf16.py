import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Exclusive prefix sum along the middle dimension: each output is the sum of the elements strictly before it.
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
            x (torch.Tensor): input of shape (batch_size, length, features).

        Returns:
            torch.Tensor: prefix sums that exclude the element itself, same shape.
        """
        return torch.cumsum(x, dim=self.scan_dim) - x


batch_size = 32
length = 1024
features = 512
scan_dim = 0


def get_inputs():
    x = torch.randn(batch_size, length, features, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [scan_dim]
