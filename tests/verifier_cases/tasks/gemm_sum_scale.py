import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then sum over features, then scale (a KernelBench-L2-style fusion, shrunk)."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        return x * self.scale


batch_size = 32
in_features = 64
out_features = 48
scale = 1.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
