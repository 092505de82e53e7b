import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales, then applies dropout. The module is never put in eval mode, so, as in KernelBench's
    Level 2 problems 66 and 83, the reference's output is random (a Level 2 fusion task)."""

    def __init__(self, scale, dropout_p):
        super().__init__()
        self.scale = scale
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x * self.scale)


batch_size = 16
dim = 256
scale = 2.0
dropout_p = 0.5


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale, dropout_p]
