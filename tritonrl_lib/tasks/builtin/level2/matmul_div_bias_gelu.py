import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A matmul with a weight parameter, then a chain of cheap ops: divide by a constant, add a
    per-feature bias parameter, exact GELU.
    """

    def __init__(self, in_features: int, out_features: int, divisor: float):
        """
        Args:
            divisor (float): the matmul's output is divided by it.
        """
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.02)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, seq_len, in_features).

        Returns:
            torch.Tensor: gelu(x @ weight / divisor + bias), shape (batch_size, seq_len, out_features).
        """
        x = torch.matmul(x, self.weight)
        x = x / self.divisor
        x = x + self.bias
        x = F.gelu(x)
        return x


batch_size = 16
seq_len = 512
in_features = 4096
out_features = 4096
divisor = 2.0


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
