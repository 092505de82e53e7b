import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer without bias, a learned per-feature bias added, softmax over the features, then a
    constant scale.
    """

    def __init__(self, in_features: int, out_features: int, scale: float):
        """
        Args:
            scale (float): multiplier applied to the probabilities.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: scale * softmax(x @ W^T + bias, dim=1), shape (batch_size, out_features).
        """
        x = self.linear(x)
        x = x + self.bias
        x = torch.softmax(x, dim=1)
        x = x * self.scale
        return x


batch_size = 1024
in_features = 4096
out_features = 8192
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
