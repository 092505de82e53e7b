import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Cosine-similarity loss: one minus the cosine similarity of paired rows, averaged over the batch.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions (torch.Tensor): shape (batch_size, dim).
            targets (torch.Tensor): same shape.

        Returns:
            torch.Tensor: a scalar, mean(1 - cos(predictions[i], targets[i])).
        """
        cosine = F.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine)


batch_size = 4096
dim = 8192


def get_inputs():
    predictions = torch.randn(batch_size, dim, dtype=torch.float16)
    targets = torch.randn(batch_size, dim, dtype=torch.float16)
    return [predictions, targets]


def get_init_inputs():
    return []
