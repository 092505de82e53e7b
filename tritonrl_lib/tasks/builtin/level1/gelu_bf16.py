import torch
import torch.nn as nn


class Model(nn.Module):
    """
    GELU activation (the exact form, built on the error function).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim).

        Returns:
            torch.Tensor: GELU of x, same shape and dtype as x.
        """
        return torch.nn.functional.gelu(x)


batch_size = 2048
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
