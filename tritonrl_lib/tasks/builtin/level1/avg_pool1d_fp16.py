import torch
import torch.nn as nn


class Model(nn.Module):
    """
    1D average pooling over the length of a batch of multi-channel sequences (zero padding is
    counted in the average).
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        """
        Args:
            kernel_size (int): window length.
            stride (int): step between windows.
            padding (int): implicit zero padding at both ends.
        """
        super(Model, self).__init__()
        self.pool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, channels, length).

        Returns:
            torch.Tensor: shape (batch_size, channels, out_length).
        """
        return self.pool(x)


batch_size = 32
channels = 128
length = 16384
kernel_size = 3
stride = 1
padding = 1


def get_inputs():
    x = torch.randn(batch_size, channels, length, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
