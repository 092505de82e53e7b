import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Row softmax followed by a constant scale.
    """

    def __init__(self, scale: float):
        """
        Args:
            scale (float): multiplier of the probabilities.
        """
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, dim).

        Returns:
            torch.Tensor: softmax(x, dim=1) * scale, same shape.
        """
        x = torch.softmax(x, dim=1)
        return x * self.scale


batch_size = 2048
dim = 32768
scale = 1.25


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [scale]
