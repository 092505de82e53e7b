import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Kullback-Leibler divergence KL(targets || predictions) between row-wise probability
    distributions, summed over classes and averaged over the batch.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions (torch.Tensor): probabilities, shape (batch_size, dim), rows sum to 1.
            targets (torch.Tensor): probabilities, same shape.

        Returns:
            torch.Tensor: a scalar, sum(targets * (log targets - log predictions)) / batch_size.
        """
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 2048
dim = 16384


def get_inputs():
    predictions = torch.randn(batch_size, dim, dtype=torch.float16).softmax(dim=-1)
    targets = torch.randn(batch_size, dim, dtype=torch.float16).softmax(dim=-1)
    return [predictions, targets]


def get_init_inputs():
    return []
