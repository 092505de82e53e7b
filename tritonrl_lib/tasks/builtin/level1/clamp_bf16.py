import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Clamps every element of a (batch, seq, hidden) tensor into [min_val, max_val].
    """

    def __init__(self, min_val: float, max_val: float):
        """
        Args:
            min_val (float): lower bound.
            max_val (float): upper bound.
        """
        super(Model, self).__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: x clamped into [min_val, max_val], same shape and dtype as x.
        """
        return torch.clamp(x, min=self.min_val, max=self.max_val)


batch_size = 16
seq_len = 1024
hidden = 4096
min_val = -0.25
max_val = 1.5


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [min_val, max_val]
