import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mish activation written out by hand: x * tanh(softplus(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        # softplus(x) = log(1 + exp(x)), computed stably by PyTorch
        sp = F.softplus(x)
        return x * torch.tanh(sp)


batch_size = 512
dim = 32768


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
