import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.shift = nn.Parameter(torch.randn(out_features) * 0.1)
        self.act = nn.Mish()

    def forward(self, features):
        y = self.linear(features)
        y = self.act(y)
        y = y + self.shift
        return F.hardtanh(y, min_val=-0.5, max_val=0.5)


batch_size = 2048
in_features = 512
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
