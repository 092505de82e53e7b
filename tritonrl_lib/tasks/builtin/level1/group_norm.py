import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Group normalization: channels are split into groups, each group of each sample is normalized
    over its channels and spatial positions, then a learned per-channel scale and shift is applied.
    """

    def __init__(self, num_groups: int, num_channels: int):
        """
        Args:
            num_groups (int): number of channel groups (divides num_channels).
            num_channels (int): number of channels.
        """
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, num_channels, height, width).

        Returns:
            torch.Tensor: the normalized tensor, same shape.
        """
        return self.gn(x)


batch_size = 32
num_groups = 8
num_channels = 128
height = 64
width = 64


def get_inputs():
    x = torch.randn(batch_size, num_channels, height, width)
    return [x]


def get_init_inputs():
    return [num_groups, num_channels]
