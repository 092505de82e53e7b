import torch
import torch.nn as nn

batch_size = 2048
features = 8192
lambd = 0.5


class Model(nn.Module):
    """Hard shrinkage: zeroes every value whose magnitude is at most `lambd`.

    Args:
        lambd (float): the shrinkage threshold.
    """

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.act = nn.Hardshrink(lambd=lambd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply hard shrinkage.

        Args:
            x (torch.Tensor): input of any shape.

        Returns:
            torch.Tensor: same shape as `x`.
        """
        return self.act(x)


def get_inputs():
    x = torch.randn(batch_size, features)
    return [x]


def get_init_inputs():
    return [lambd]
