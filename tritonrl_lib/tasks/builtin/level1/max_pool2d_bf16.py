import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D max pooling with padding and dilation over a batch of multi-channel images.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        """
        Args:
            kernel_size (int): side of the square pooling window.
            stride (int): step between windows.
            padding (int): implicit -inf padding on every side.
            dilation (int): spacing between the window's elements.
        """
        super(Model, self).__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): images of shape (batch_size, channels, height, width).

        Returns:
            torch.Tensor: pooled tensor of shape (batch_size, channels, out_height, out_width).
        """
        return self.pool(x)


batch_size = 16
channels = 64
height = 224
width = 448
kernel_size = 3
stride = 1
padding = 1
dilation = 1


def get_inputs():
    x = torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
