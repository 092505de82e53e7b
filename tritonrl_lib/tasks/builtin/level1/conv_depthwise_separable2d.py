import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A depthwise-separable 2D convolution: a depthwise convolution, then a pointwise (1x1) one.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        dilation: int,
    ):
        """
        Args:
            in_channels (int): channels of the input.
            out_channels (int): channels of the output.
            kernel_size (int): size of the kernel along every dimension.
            stride (int): step of the convolution.
            padding (int): implicit zero padding on every side.
            dilation (int): spacing between kernel elements.
        """
        super(Model, self).__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                   dilation=dilation, groups=in_channels, bias=False)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: output of shape (batch_size, out_channels, height_out, width_out).
        """
        x = self.depthwise(x)
        x = self.pointwise(x)
        return x


batch_size = 16
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3
stride = 1
padding = 2
dilation = 2


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]
