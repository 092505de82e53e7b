import torch
import torch.nn as nn

rows = 4096
cols = 4096
value = 0.5


class Model(nn.Module):
    """Computes c + value * a * b.

    Args:
        value: the scalar multiplier of the product.
    """

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, c, a, b):
        """
        Args:
            c: tensor added to the product, shape (rows, cols).
            a: first factor, shape (rows, cols).
            b: second factor, shape (rows, cols).

        Returns:
            Tensor of shape (rows, cols).
        """
        return torch.addcmul(c, a, b, value=self.value)


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return [value]
