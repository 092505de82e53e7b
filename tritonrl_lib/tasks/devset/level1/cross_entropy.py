import torch
import torch.nn as nn

batch_size = 4096
num_classes = 1000


class Model(nn.Module):
    """Multi-class cross entropy of unnormalized logits against integer class labels, averaged
    over the batch.

    Returns:
        A 0-dim tensor.
    """

    def __init__(self):
        super().__init__()
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, logits, target):
        return self.criterion(logits, target)


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    target = torch.randint(0, num_classes, (batch_size,))
    return [logits, target]


def get_init_inputs():
    return []
