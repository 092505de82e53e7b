import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A transposed 1D convolution with stride, padding, output padding and dilation.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
        dilation: int,
    ):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (int): size of the kernel along every dimension.
            stride (int): step of the convolution.
            padding (int): implicit zero padding on every side.
            output_padding (int): extra size added to one side of each output dimension.
            dilation (int): spacing between kernel elements.
        """
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                                 output_padding=output_padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, length).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, length_out).
        """
        return self.conv_transpose(x)


batch_size = 16
in_channels = 64
out_channels = 32
length = 8192
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
dilation = 2


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation]
