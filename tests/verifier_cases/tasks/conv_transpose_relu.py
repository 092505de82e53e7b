import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d (stride 1) -> ReLU."""

    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv_t = nn.ConvTranspose2d(cin, cout, k)

    def forward(self, x):
        return torch.relu(self.conv_t(x))


batch_size = 2
cin = 4
cout = 8
k = 3
H = W = 8


def get_inputs():
    return [torch.randn(batch_size, cin, H, W)]


def get_init_inputs():
    return [cin, cout, k]
