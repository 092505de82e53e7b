import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A 2D convolution, then a chain of cheap ops: subtract a per-channel bias parameter, tanh,
    multiply by a constant, and add the convolution's output back (a residual).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scaling_factor: float):
        """
        Args:
            scaling_factor (float): multiplier applied after tanh.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: tanh(conv(x) - bias) * scaling_factor + conv(x),
                shape (batch_size, out_channels, out_height, out_width).
        """
        x = self.conv(x)
        original = x.clone().detach()
        x = x - self.bias
        x = torch.tanh(x)
        x = x * self.scaling_factor
        x = x + original
        return x


batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
scaling_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor]
