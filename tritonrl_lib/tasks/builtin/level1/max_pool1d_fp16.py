import torch
import torch.nn as nn


class Model(nn.Module):
    """
    1D max pooling over the length of a batch of multi-channel sequences.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        """
        Args:
            kernel_size (int): window length.
            stride (int): step between windows.
            padding (int): implicit -inf padding at both ends.
            dilation (int): spacing between the window's elements.
        """
        super(Model, self).__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

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
kernel_size = 5
stride = 3
padding = 2
dilation = 2


def get_inputs():
    x = torch.randn(batch_size, channels, length, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
