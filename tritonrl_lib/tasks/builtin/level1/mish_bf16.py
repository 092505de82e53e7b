import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Mish activation, x * tanh(softplus(x)), on a (batch, seq, hidden) tensor.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: Mish of x, same shape and dtype as x.
        """
        return torch.nn.functional.mish(x)


batch_size = 16
seq_len = 1024
hidden = 4096


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
