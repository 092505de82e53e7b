import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
num_coords = 512
beta = 0.5


class Model(nn.Module):
    def __init__(self, beta=1.0):
        super().__init__()
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, beta=self.beta)


def get_inputs():
    return [torch.randn(batch_size, num_coords), torch.randn(batch_size, num_coords)]


def get_init_inputs():
    return [beta]
