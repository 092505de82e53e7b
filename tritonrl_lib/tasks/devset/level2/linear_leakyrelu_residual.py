import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A residual MLP block without normalization: x + leaky_relu(W x + b)."""

    def __init__(self, hidden, negative_slope=0.01):
        super().__init__()
        self.fc = nn.Linear(hidden, hidden)
        self.negative_slope = negative_slope

    def forward(self, x):
        h = self.fc(x)
        h = F.leaky_relu(h, negative_slope=self.negative_slope)
        return x + h


tokens = 4096
hidden = 2048


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, 0.1]
