import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A 3D transposed convolution, then a chain of cheap ops: add a per-channel bias parameter,
    HardSwish, multiply by a constant.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int,
                 output_padding: int, scale: float):
        """
        Args:
            scale (float): multiplier applied after HardSwish.
        """
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, depth, height, width).

        Returns:
            torch.Tensor: hardswish(conv_transpose(x) + bias) * scale,
                shape (batch_size, out_channels, out_depth, out_height, out_width).
        """
        x = self.conv_transpose(x)
        x = x + self.bias
        x = F.hardswish(x)
        x = x * self.scale
        return x


batch_size = 16
in_channels = 32
out_channels = 64
depth = 8
height = 16
width = 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, scale]
