import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    LayerNorm over the hidden dimension followed by GELU.
    """

    def __init__(self, hidden: int):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: gelu(layer_norm(x)), same shape.
        """
        x = self.norm(x)
        x = F.gelu(x)
        return x


batch_size = 32
seq_len = 512
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
