import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A square linear layer whose scaled output is added back to its input: x + scale * linear(x).
    """

    def __init__(self, hidden: int, scale: float):
        """
        Args:
            scale (float): weight of the linear branch.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, hidden).

        Returns:
            torch.Tensor: x + scale * (x @ W^T + b), shape (batch_size, hidden).
        """
        return x + self.scale * self.linear(x)


batch_size = 4096
hidden = 4096
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, scale]
