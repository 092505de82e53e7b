import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Applies the rectified linear unit, max(x, 0), to every element of the input.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input tensor of any shape.

        Returns:
            torch.Tensor: ReLU of x, with the same shape and dtype.
        """
        return torch.relu(x)


batch_size = 2048
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
