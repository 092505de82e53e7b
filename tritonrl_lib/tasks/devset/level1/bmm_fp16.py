import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product in half precision.

    Args:
        a: (batch, m, k) float16.
        b: (batch, k, n) float16.

    Returns:
        (batch, m, n) float16.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


batch_size = 32
m = 512
k = 256
n = 384


def get_inputs():
    a = torch.randn(batch_size, m, k, dtype=torch.float16)
    b = torch.randn(batch_size, k, n, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
