import torch
import torch.nn as nn


class Model(nn.Module):
    """
    ELU activation on a batch of feature maps: x for x > 0, alpha * (exp(x) - 1) otherwise.
    """

    def __init__(self, alpha: float):
        """
        Args:
            alpha (float): scale of the negative branch.
        """
        super(Model, self).__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, channels, height, width).

        Returns:
            torch.Tensor: ELU of x, same shape and dtype as x.
        """
        return torch.nn.functional.elu(x, alpha=self.alpha)


batch_size = 16
channels = 64
height = 128
width = 256
alpha = 0.5


def get_inputs():
    x = torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [alpha]
