import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    SwiGLU activation: the input's last dimension is split in two halves a and b, and the
    output is silu(a) * b.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, 2 * hidden).

        Returns:
            torch.Tensor: silu(x[..., :hidden]) * x[..., hidden:], shape (batch_size, seq_len, hidden).
        """
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b


batch_size = 16
seq_len = 1024
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, 2 * hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
