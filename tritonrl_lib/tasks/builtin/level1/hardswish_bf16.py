import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Hard swish on feature maps: x * relu6(x + 3) / 6.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, channels, height, width).

        Returns:
            torch.Tensor: hard swish of x, same shape and dtype as x.
        """
        return torch.nn.functional.hardswish(x)


batch_size = 16
channels = 64
height = 128
width = 256


def get_inputs():
    x = torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
