import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Residual add followed by LayerNorm ("add & norm" of a post-LN transformer block).
    """

    def __init__(self, hidden: int):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): sublayer output, shape (batch_size, seq_len, hidden).
            residual (torch.Tensor): the sublayer's input, same shape.

        Returns:
            torch.Tensor: layer_norm(x + residual), same shape.
        """
        return self.norm(x + residual)


batch_size = 32
seq_len = 512
hidden = 4096


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    residual = torch.randn(batch_size, seq_len, hidden)
    return [x, residual]


def get_init_inputs():
    return [hidden]
