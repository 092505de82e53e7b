import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Divides two tensors element by element (denominators are kept away from zero).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
        """
        Args:
            numerator (torch.Tensor): shape (batch_size, seq_len, hidden).
            denominator (torch.Tensor): same shape, values in [0.5, 1.5).

        Returns:
            torch.Tensor: numerator / denominator.
        """
        return numerator / denominator


batch_size = 16
seq_len = 1024
hidden = 4096


def get_inputs():
    numerator = torch.randn(batch_size, seq_len, hidden, dtype=torch.bfloat16)
    denominator = torch.rand(batch_size, seq_len, hidden, dtype=torch.bfloat16) + 0.5
    return [numerator, denominator]


def get_init_inputs():
    return []
