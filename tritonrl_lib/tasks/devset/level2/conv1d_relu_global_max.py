import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
in_channels = 64
out_channels = 128
length = 2048
kernel_size = 7


class Model(nn.Module):
    """Text-CNN style feature extractor: Conv1d, ReLU, then max over time.

    Args:
        in_channels (int): embedding width.
        out_channels (int): number of filters.
        kernel_size (int): filter width.
    """

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, embeddings):
        """
        Args:
            embeddings: (batch, in_channels, length).

        Returns:
            (batch, out_channels): the largest activation of each filter.
        """
        h = F.relu(self.conv(embeddings))
        return torch.amax(h, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
