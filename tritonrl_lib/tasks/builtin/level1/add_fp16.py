import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Adds two tensors of the same shape element by element.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a (torch.Tensor): first operand, shape (batch_size, dim).
            b (torch.Tensor): second operand, same shape as a.

        Returns:
            torch.Tensor: a + b.
        """
        return a + b


batch_size = 2048
dim = 16384


def get_inputs():
    a = torch.randn(batch_size, dim, dtype=torch.float16)
    b = torch.randn(batch_size, dim, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
