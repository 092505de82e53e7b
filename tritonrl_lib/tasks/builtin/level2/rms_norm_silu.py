import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    RMS normalization with a learned gain, followed by SiLU.
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
            x (torch.Tensor): shape (batch_size, seq_len, hidden).

        Returns:
            torch.Tensor: silu(x / sqrt(mean(x^2) + eps) * weight), same shape.
        """
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        return F.silu(x)


batch_size = 32
seq_len = 512
hidden = 4096
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]
