import torch
from torch import nn

batch_size = 128
channels = 64
length = 2048
alpha = 1.3


class Model(nn.Module):
    """
    Continuously differentiable exponential linear unit.

    Parameters
    ----------
    alpha : float
        Scale of the negative branch, ``alpha * (exp(x / alpha) - 1)``.
    """

    def __init__(self, alpha=1.0):
        super(Model, self).__init__()
        self.celu = nn.CELU(alpha=alpha)

    def forward(self, x):
        """
        Parameters
        ----------
        x : torch.Tensor
            Shape ``(batch, channels, length)``.

        Returns
        -------
        torch.Tensor
            Same shape as ``x``.
        """
        return self.celu(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [alpha]
