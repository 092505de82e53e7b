import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Mean squared error between predictions and targets, averaged over every element.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions (torch.Tensor): shape (batch_size, dim).
            targets (torch.Tensor): same shape as predictions.

        Returns:
            torch.Tensor: a scalar, mean((predictions - targets) ** 2).
        """
        return torch.nn.functional.mse_loss(predictions, targets)


batch_size = 2048
dim = 16384


def get_inputs():
    predictions = torch.randn(batch_size, dim, dtype=torch.float16)
    targets = torch.randn(batch_size, dim, dtype=torch.float16)
    return [predictions, targets]


def get_init_inputs():
    return []
