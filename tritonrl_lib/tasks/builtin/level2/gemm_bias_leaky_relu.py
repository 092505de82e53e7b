import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A linear layer followed by LeakyReLU.
    """

    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        """
        Args:
            negative_slope (float): slope for negative values.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: leaky_relu(x @ W^T + b), shape (batch_size, out_features).
        """
        x = self.linear(x)
        x = F.leaky_relu(x, negative_slope=self.negative_slope)
        return x


batch_size = 2048
in_features = 4096
out_features = 2048
negative_slope = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, negative_slope]
