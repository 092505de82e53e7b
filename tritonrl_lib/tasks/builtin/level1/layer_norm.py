import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Layer normalization over the hidden dimension of a (batch, seq, hidden) tensor, with a learned
    per-feature scale and shift.
    """

    def __init__(self, hidden: int):
        """
        Args:
            hidden (int): size of the normalized (last) dimension.
        """
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: the normalized tensor, same shape.
        """
        return self.norm(x)


batch_size = 32
seq_len = 512
hidden = 4096


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden]
