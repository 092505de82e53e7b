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


batch_size = 16
channels = 64
height = 128
width = 256


def get_inputs():
    x = torch.randn(batch_size, channels, height, width, dtype=torch.float16)
    y = torch.randn(batch_size, channels, height, width, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
