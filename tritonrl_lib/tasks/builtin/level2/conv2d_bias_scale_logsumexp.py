import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A 2D convolution, a per-channel bias parameter, a constant scale, then logsumexp over the
    channels.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        """
        Args:
            scale (float): multiplier applied before the logsumexp.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: logsumexp((conv(x) + bias) * scale, dim=1), channels kept,
                shape (batch_size, 1, out_height, out_width).
        """
        x = self.conv(x)
        x = x + self.bias
        x = x * self.scale
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x


batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
