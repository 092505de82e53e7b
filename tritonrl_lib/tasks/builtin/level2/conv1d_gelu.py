import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A 1D convolution over sequences followed by GELU.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, length).

        Returns:
            torch.Tensor: gelu(conv1d(x)), shape (batch_size, out_channels, out_length).
        """
        x = self.conv(x)
        x = F.gelu(x)
        return x


batch_size = 64
in_channels = 128
out_channels = 256
length = 4096
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
