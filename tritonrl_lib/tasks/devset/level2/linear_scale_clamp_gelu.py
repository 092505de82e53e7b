import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, then a scalar scale, a clamp and GELU.

    Args:
        in_features (int): input width.
        out_features (int): output width.
        scale (float): multiplier applied after the projection.
        clamp_min (float): lower clamp bound.
        clamp_max (float): upper clamp bound.
    """

    def __init__(self, in_features, out_features, scale, clamp_min, clamp_max):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_features).

        Returns:
            torch.Tensor: (batch_size, out_features).
        """
        x = self.proj(x)
        x = x * self.scale
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        return F.gelu(x)


batch_size = 512
in_features = 1024
out_features = 2048
scale = 1.5
clamp_min, clamp_max = -1.0, 1.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, clamp_min, clamp_max]
