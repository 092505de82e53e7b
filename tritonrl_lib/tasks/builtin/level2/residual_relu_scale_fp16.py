import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Residual add, ReLU, then a constant scale: relu(x + residual) * scale.
    """

    def __init__(self, scale: float):
        """
        Args:
            scale (float): multiplier applied last.
        """
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, channels, height, width).
            residual (torch.Tensor): same shape.

        Returns:
            torch.Tensor: relu(x + residual) * scale, same shape.
        """
        x = x + residual
        x = torch.relu(x)
        return x * self.scale


batch_size = 16
channels = 64
height = 128
width = 256
scale = 0.35


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.float16), torch.randn(batch_size, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return [scale]
