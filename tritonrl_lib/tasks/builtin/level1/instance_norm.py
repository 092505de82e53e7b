import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Instance normalization: every (sample, channel) plane is normalized to zero mean and unit
    variance over its spatial positions.
    """

    def __init__(self, num_features: int):
        """
        Args:
            num_features (int): number of channels.
        """
        super(Model, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, num_features, height, width).

        Returns:
            torch.Tensor: the normalized tensor, same shape.
        """
        return self.inorm(x)


batch_size = 32
num_features = 64
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, num_features, height, width)
    return [x]


def get_init_inputs():
    return [num_features]
