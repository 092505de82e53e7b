import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D average pooling over a batch of multi-channel images (zero padding is counted in the average).
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        """
        Args:
            kernel_size (int): side of the square window.
            stride (int): step between windows.
            padding (int): implicit zero padding on every side.
        """
        super(Model, self).__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, channels, height, width).

        Returns:
            torch.Tensor: shape (batch_size, channels, out_height, out_width).
        """
        return self.pool(x)


batch_size = 16
channels = 64
height = 256
width = 512
kernel_size = 5
stride = 3
padding = 2


def get_inputs():
    x = torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
