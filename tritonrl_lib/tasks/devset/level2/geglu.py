import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 512
dim = 1024
inner_dim = 2048


class Model(nn.Module):
    """GEGLU feed-forward gate.

    One projection produces both halves; the output is value * gelu(gate).

    Args:
        dim: model width.
        inner_dim: width of each half.
    """

    def __init__(self, dim, inner_dim):
        super().__init__()
        self.proj = nn.Linear(dim, inner_dim * 2)

    def forward(self, x):
        value, gate = self.proj(x).chunk(2, dim=-1)
        return value * F.gelu(gate)


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, inner_dim]
