import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a GEMM, batch normalization and dropout.
    """
    def __init__(self, in_features, out_features, dropout_p):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        x = self.gemm(x)
        x = self.bn(x)
        x = self.dropout(x)
        return x

batch_size = 16
in_features = 32
out_features = 24
dropout_p = 0.2

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, dropout_p]
