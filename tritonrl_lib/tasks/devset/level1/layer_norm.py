import torch
import torch.nn as nn

batch_size = 16
seq_len = 1024
hidden = 1024


class Model(nn.Module):
    """Layer normalization over the hidden dimension of a transformer activation.

    Args:
        hidden (int): size of the normalized (last) dimension.
        eps (float): added to the variance for numerical stability.
    """

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch, seq_len, hidden).

        Returns:
            The normalized tensor, same shape.
        """
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, 1e-5]
