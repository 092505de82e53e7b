import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then tanh, in float32, its pre-activations large enough that tanh is mostly saturated: the
    range set scales them by 64 more, the outputs' magnitude hardly grows (nor the absolute tolerance with
    it), and TF32's rounding of a pre-activation near 0 passes through tanh unchanged (issue 31: an honest
    fused kernel with Triton's default TF32 ended mismatch:range)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.linear(x))


batch_size = 128
in_features = 256
out_features = 64


def get_inputs():
    return [torch.randn(batch_size, in_features) * 8]


def get_init_inputs():
    return [in_features, out_features]
