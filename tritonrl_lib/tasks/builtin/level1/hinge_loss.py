import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Hinge loss for +1/-1 labels: mean(max(0, 1 - predictions * targets)).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions (torch.Tensor): shape (batch_size, dim).
            targets (torch.Tensor): same shape as predictions.

        Returns:
            torch.Tensor: a scalar, the mean hinge loss.
        """
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 8192
dim = 4096


def get_inputs():
    predictions = torch.randn(batch_size, dim)
    targets = torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []
