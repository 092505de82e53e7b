import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Element-wise selection: keeps x where it is positive and takes y everywhere else.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, channels, height, width).
            y (torch.Tensor): same shape as x.

        Returns:
            torch.Tensor: torch.where(x > 0, x, y).
        """
        return torch.where(x > 0, x, y)


batch_size = 32
channels = 64
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    y = torch.randn(batch_size, channels, height, width)
    return [x, y]


def get_init_inputs():
    return []
