import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer, ReLU, logsumexp over the features (kept as a column), then a constant scale.
    """

    def __init__(self, in_features: int, out_features: int, scale: float):
        """
        Args:
            scale (float): multiplier applied after the logsumexp.
        """
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: scale * logsumexp(relu(x @ W^T + b), dim=1), shape (batch_size, 1).
        """
        x = self.linear(x)
        x = torch.relu(x)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = x * self.scale
        return x


batch_size = 1024
in_features = 8192
out_features = 8192
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
