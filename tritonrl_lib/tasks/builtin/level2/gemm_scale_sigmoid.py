import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer, a constant scale, then a sigmoid.
    """

    def __init__(self, in_features: int, out_features: int, scale: float):
        """
        Args:
            scale (float): multiplier applied before the sigmoid.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: sigmoid(scale * (x @ W^T + b)), shape (batch_size, out_features).
        """
        x = self.linear(x)
        x = x * self.scale
        x = torch.sigmoid(x)
        return x


batch_size = 4096
in_features = 2048
out_features = 4096
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
