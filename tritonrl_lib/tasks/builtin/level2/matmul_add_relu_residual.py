import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A square linear layer with ReLU, added back to its input: x + relu(linear(x)).
    """

    def __init__(self, hidden: int):
        super(Model, self).__init__()
        self.linear = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, hidden).

        Returns:
            torch.Tensor: x + relu(x @ W^T + b), shape (batch_size, hidden).
        """
        y = torch.relu(self.linear(x))
        return x + y


batch_size = 4096
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
