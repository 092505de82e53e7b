import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, input_tensor):
        return torch.argmin(input_tensor, dim=self.dim)


batch_size = 32
seq_len = 256
vocab = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, vocab)]


def get_init_inputs():
    return [-1]
