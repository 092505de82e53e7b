import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A standard 3D convolution with a cubic kernel and zero padding over volumes.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (int): size of the kernel along every dimension.
            padding (int): implicit zero padding on every side.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, depth, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, depth_out, height_out, width_out).
        """
        return self.conv(x)


batch_size = 16
in_channels = 3
out_channels = 64
depth = 16
height = 64
width = 64
kernel_size = 3
padding = 1


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding]
