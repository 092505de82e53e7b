import torch
import torch.nn as nn

batch_size = 256
seq_len = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, rewards):
        # suffix sums ("reward-to-go"): out[i] = sum_{j >= i} rewards[j]
        return rewards.flip(-1).cumsum(-1).flip(-1)


def get_inputs():
    return [torch.randn(batch_size, seq_len)]


def get_init_inputs():
    return []
