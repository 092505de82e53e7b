import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Scales activations by a constant, adds a learned per-feature bias, then applies tanh.
    """

    def __init__(self, hidden: int, scale: float):
        """
        Args:
            hidden (int): size of the last dimension (the bias length).
            scale (float): multiplier applied first.
        """
        super(Model, self).__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(hidden) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: tanh(x * scale + bias), same shape.
        """
        x = x * self.scale
        x = x + self.bias
        return torch.tanh(x)


batch_size = 16
seq_len = 1024
hidden = 2048
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, scale]
