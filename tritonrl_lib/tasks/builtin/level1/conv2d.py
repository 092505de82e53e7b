import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A grouped 2D convolution with an asymmetric kernel and asymmetric padding over non-square images.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, padding: tuple, groups: int):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (tuple): (kernel_h, kernel_w), an asymmetric kernel.
            padding (tuple): (pad_h, pad_w) zero padding.
            groups (int): blocked connections from input to output channels.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv(x)


batch_size = 16
in_channels = 32
out_channels = 64
height = 128
width = 256
kernel_size = (3, 5)
padding = (1, 2)
groups = 2


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding, groups]
