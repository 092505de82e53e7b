import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A gated activation: x * sigmoid(gate), as in GLU-style layers.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, hidden).
            gate (torch.Tensor): same shape.

        Returns:
            torch.Tensor: x * sigmoid(gate), same shape.
        """
        return x * torch.sigmoid(gate)


batch_size = 16
seq_len = 1024
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden, dtype=torch.float16), torch.randn(batch_size, seq_len, hidden, dtype=torch.float16)]


def get_init_inputs():
    return []
