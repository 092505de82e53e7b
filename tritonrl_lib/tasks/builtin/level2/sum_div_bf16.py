import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Divides every row by the sum of its absolute values (L1 row normalisation).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, dim).

        Returns:
            torch.Tensor: x / sum(|x|, dim=1, keepdim=True), same shape.
        """
        total = torch.sum(torch.abs(x), dim=1, keepdim=True)
        return x / total


batch_size = 2048
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
