import torch
import torch.nn as nn


class Model(nn.Module):
    """
    RMS normalization over the hidden dimension with a learned per-feature gain
    (as used in LLaMA-style transformers).
    """

    def __init__(self, hidden: int, eps: float):
        """
        Args:
            hidden (int): size of the normalized (last) dimension.
            eps (float): added to the mean square before the square root.
        """
        super(Model, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: x / sqrt(mean(x^2) + eps) * weight, same shape.
        """
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


batch_size = 32
seq_len = 512
hidden = 4096
eps = 1e-6


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden, eps]
