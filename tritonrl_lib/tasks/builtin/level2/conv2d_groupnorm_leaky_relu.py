import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A 2D convolution, group normalisation over its channels, then LeakyReLU.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int,
                 negative_slope: float):
        """
        Args:
            num_groups (int): groups the output channels are split into (out_channels % num_groups == 0).
            negative_slope (float): LeakyReLU slope for negative values.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: leaky_relu(group_norm(conv(x))), shaped like the convolution's output.
        """
        x = self.conv(x)
        x = self.group_norm(x)
        x = F.leaky_relu(x, negative_slope=self.negative_slope)
        return x


batch_size = 32
in_channels = 32
out_channels = 128
height = 128
width = 128
kernel_size = 3
num_groups = 8
negative_slope = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups, negative_slope]
