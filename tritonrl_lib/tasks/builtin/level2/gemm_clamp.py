import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer whose output is clamped into [min_val, max_val].
    """

    def __init__(self, in_features: int, out_features: int, min_val: float, max_val: float):
        """
        Args:
            min_val (float): lower bound.
            max_val (float): upper bound.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: clamp(x @ W^T + b, min_val, max_val), shape (batch_size, out_features).
        """
        x = self.linear(x)
        x = torch.clamp(x, min=self.min_val, max=self.max_val)
        return x


batch_size = 2048
in_features = 4096
out_features = 4096
min_val = -1.0
max_val = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, min_val, max_val]
