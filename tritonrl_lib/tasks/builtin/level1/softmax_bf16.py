import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Softmax over the last dimension of a 2D tensor: each row becomes a probability distribution.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): logits of shape (batch_size, dim).

        Returns:
            torch.Tensor: softmax of x along dim 1, same shape.
        """
        return torch.softmax(x, dim=1)


batch_size = 2048
dim = 32768


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
