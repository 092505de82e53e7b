import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Root mean square of each row: square, mean over the last dimension, square root.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: sqrt(mean(x ** 2, dim=-1)), shape (batch_size, seq_len).
        """
        x = x * x
        x = torch.mean(x, dim=-1)
        return torch.sqrt(x)


batch_size = 16
seq_len = 1024
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
