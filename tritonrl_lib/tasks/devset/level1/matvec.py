import torch
import torch.nn as nn

M = 8192
K = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, x):
        # (M, K) @ (K, 1) -> (M, 1)
        return A @ x


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
