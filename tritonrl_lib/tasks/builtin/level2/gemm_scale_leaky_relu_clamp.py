import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A linear layer, then a chain of cheap ops: multiply by a constant, LeakyReLU, clamp.
    """

    def __init__(self, in_features: int, out_features: int, scale: float, negative_slope: float,
                 min_val: float, max_val: float):
        """
        Args:
            scale (float): multiplier applied to the linear layer's output.
            negative_slope (float): LeakyReLU slope for negative values.
            min_val (float): lower clamp bound.
            max_val (float): upper clamp bound.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.negative_slope = negative_slope
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: clamp(leaky_relu(scale * (x @ W^T + b)), min_val, max_val),
                shape (batch_size, out_features).
        """
        x = self.linear(x)
        x = x * self.scale
        x = F.leaky_relu(x, negative_slope=self.negative_slope)
        x = torch.clamp(x, min=self.min_val, max=self.max_val)
        return x


batch_size = 1024
in_features = 8192
out_features = 8192
scale = 2.0
negative_slope = 0.1
min_val = -0.1
max_val = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, negative_slope, min_val, max_val]
