import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D batch normalization: each channel is normalized with statistics over the batch and the
    spatial positions, then scaled and shifted by learned per-channel parameters.
    """

    def __init__(self, num_features: int):
        """
        Args:
            num_features (int): number of channels.
        """
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, num_features, height, width).

        Returns:
            torch.Tensor: the normalized tensor, same shape.
        """
        return self.bn(x)


batch_size = 32
num_features = 64
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, num_features, height, width)
    return [x]


def get_init_inputs():
    return [num_features]
