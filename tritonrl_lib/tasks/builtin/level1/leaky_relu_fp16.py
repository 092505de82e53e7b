import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Leaky ReLU: x where x >= 0, negative_slope * x elsewhere.
    """

    def __init__(self, negative_slope: float):
        """
        Args:
            negative_slope (float): slope applied to negative inputs.
        """
        super(Model, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of shape (batch_size, dim).

        Returns:
            torch.Tensor: leaky ReLU of x, same shape and dtype as x.
        """
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 2048
dim = 16384
negative_slope = 0.05


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return [negative_slope]
