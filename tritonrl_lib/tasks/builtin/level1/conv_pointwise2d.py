import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A pointwise (1x1) 2D convolution with bias: a per-pixel linear map of the channels.
    """

    def __init__(self, in_channels: int, out_channels: int):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
        """
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, height, width).
        """
        return self.conv(x)


batch_size = 16
in_channels = 64
out_channels = 128
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
