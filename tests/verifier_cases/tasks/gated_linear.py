import torch
import torch.nn as nn


class Model(nn.Module):
    """Gated linear unit with two Linear layers on the same input: fc1(x) * sigmoid(fc2(x))."""

    def __init__(self, in_f, out_f):
        super().__init__()
        self.fc1 = nn.Linear(in_f, out_f)
        self.fc2 = nn.Linear(in_f, out_f)

    def forward(self, x):
        return self.fc1(x) * torch.sigmoid(self.fc2(x))


batch_size = 32
in_f = 64
out_f = 32


def get_inputs():
    return [torch.randn(batch_size, in_f)]


def get_init_inputs():
    return [in_f, out_f]
