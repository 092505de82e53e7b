import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
d_in = 4096
d_out = 1024
divisor = 2.0


class Model(nn.Module):
    def __init__(self, d_in, d_out, divisor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out) * 0.02)
        self.bias = nn.Parameter(torch.randn(d_out) * 0.02)
        self.divisor = divisor

    def forward(self, inp):
        out = torch.matmul(inp, self.weight) + self.bias
        out = F.silu(out)
        return out / self.divisor


def get_inputs():
    return [torch.randn(batch_size, d_in)]


def get_init_inputs():
    return [d_in, d_out, divisor]
