import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A transposed 3D convolution with stride, padding and output padding, no bias.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
    ):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (int): size of the kernel along every dimension.
            stride (int): step of the convolution.
            padding (int): implicit zero padding on every side.
            output_padding (int): extra size added to one side of each output dimension.
        """
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                                 output_padding=output_padding, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, depth, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, depth_out, height_out, width_out).
        """
        return self.conv_transpose(x)


batch_size = 8
in_channels = 32
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
