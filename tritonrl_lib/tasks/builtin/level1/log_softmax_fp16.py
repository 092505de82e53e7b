import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Log-softmax over the last dimension of a 2D tensor (log-probabilities per row).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): logits of shape (batch_size, dim).

        Returns:
            torch.Tensor: log_softmax of x along dim 1, same shape.
        """
        return torch.log_softmax(x, dim=1)


batch_size = 2048
dim = 32768


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
