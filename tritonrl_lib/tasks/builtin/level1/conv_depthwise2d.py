import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A depthwise 2D convolution: every channel convolved with its own square kernel.
    """

    def __init__(self, in_channels: int, kernel_size: int, stride: int, padding: int):
        """
        Args:
            in_channels (int): channels of the input.
            kernel_size (int): size of the kernel along every dimension.
            stride (int): step of the convolution.
            padding (int): implicit zero padding on every side.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding, groups=in_channels,
                              bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, in_channels, height_out, width_out).
        """
        return self.conv(x)


batch_size = 16
in_channels = 64
height = 256
width = 256
kernel_size = 3
stride = 1
padding = 1


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size, stride, padding]
