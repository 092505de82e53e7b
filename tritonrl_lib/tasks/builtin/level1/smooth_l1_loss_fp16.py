import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Smooth L1 (Huber-style) loss: quadratic for differences below beta, linear above, averaged.
    """

    def __init__(self, beta: float):
        """
        Args:
            beta (float): the difference at which the loss turns from quadratic to linear.
        """
        super(Model, self).__init__()
        self.beta = beta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions (torch.Tensor): shape (batch_size, dim).
            targets (torch.Tensor): same shape as predictions.

        Returns:
            torch.Tensor: a scalar, the mean smooth L1 loss.
        """
        return F.smooth_l1_loss(predictions, targets, beta=self.beta)


batch_size = 1024
dim = 32768
beta = 0.5


def get_inputs():
    predictions = torch.randn(batch_size, dim, dtype=torch.float16)
    targets = torch.randn(batch_size, dim, dtype=torch.float16)
    return [predictions, targets]


def get_init_inputs():
    return [beta]
