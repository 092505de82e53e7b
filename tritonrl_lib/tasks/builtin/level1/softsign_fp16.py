import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Softsign, x / (1 + |x|), on every element.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim).

        Returns:
            torch.Tensor: softsign of x, values in (-1, 1), same shape and dtype as x.
        """
        return torch.nn.functional.softsign(x)


batch_size = 2048
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
