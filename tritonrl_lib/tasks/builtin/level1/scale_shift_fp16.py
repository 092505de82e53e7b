import torch
import torch.nn as nn


class Model(nn.Module):
    """
    An affine map with scalar coefficients: x * scale + shift.
    """

    def __init__(self, scale: float, shift: float):
        """
        Args:
            scale (float): multiplier.
            shift (float): offset added after scaling.
        """
        super(Model, self).__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim).

        Returns:
            torch.Tensor: x * scale + shift, same shape and dtype as x.
        """
        return x * self.scale + self.shift


batch_size = 2048
dim = 16384
scale = 0.75
shift = -1.0


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [scale, shift]
