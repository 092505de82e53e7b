import torch
import torch.nn as nn

batch_size = 2048
hidden = 768
num_classes = 4096
temperature = 2.0


class Model(nn.Module):
    """Classifier head: a linear layer, logits divided by a temperature, then softmax over the
    classes."""

    def __init__(self, hidden, num_classes, temperature):
        super().__init__()
        self.head = nn.Linear(hidden, num_classes)
        self.temperature = temperature

    def forward(self, x):
        logits = self.head(x) / self.temperature
        return logits.softmax(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, num_classes, temperature]
