import torch
import torch.nn as nn


class Model(nn.Module):
    """
    GroupNorm (with learned per-channel scale and shift) followed by ReLU.
    """

    def __init__(self, num_groups: int, num_channels: int):
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, num_channels, height, width).

        Returns:
            torch.Tensor: relu(group_norm(x)), same shape.
        """
        return torch.relu(self.gn(x))


batch_size = 32
num_groups = 16
num_channels = 256
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, num_channels, height, width)]


def get_init_inputs():
    return [num_groups, num_channels]
