import torch
import torch.nn as nn

batch_size = 1024
dim = 4096
beta = 2.0
threshold = 10.0


class Model(nn.Module):
    def __init__(self, beta, threshold):
        super().__init__()
        self.softplus = nn.Softplus(beta=beta, threshold=threshold)

    def forward(self, x):
        return self.softplus(x)


def get_inputs():
    # wide enough that some values take the linear branch (beta * x > threshold)
    return [torch.randn(batch_size, dim) * 4.0]


def get_init_inputs():
    return [beta, threshold]
