import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A grouped transposed 2D convolution that upsamples square images by its stride.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        groups: int,
    ):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (int): size of the kernel along every dimension.
            stride (int): step of the convolution.
            padding (int): implicit zero padding on every side.
            groups (int): blocked connections from input to output channels.
        """
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                                 groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv_transpose(x)


batch_size = 16
in_channels = 64
out_channels = 32
height = 64
width = 64
kernel_size = 4
stride = 2
padding = 1
groups = 2


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups]
