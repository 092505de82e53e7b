import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Cross-entropy loss of class logits against integer class labels, averaged over the batch.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """
        Args:
            logits (torch.Tensor): shape (batch_size, num_classes).
            labels (torch.Tensor): int64 class indices, shape (batch_size,).

        Returns:
            torch.Tensor: a scalar, mean over rows of logsumexp(logits) - logits[label].
        """
        return F.cross_entropy(logits, labels)


batch_size = 8192
num_classes = 4096


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    labels = torch.randint(0, num_classes, (batch_size,))
    return [logits, labels]


def get_init_inputs():
    return []
