import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-pixel class log-probabilities of a segmentation head: log-softmax over the channel
    dimension of an (N, C, H, W) score map."""

    def __init__(self):
        super().__init__()
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, scores):
        return self.log_softmax(scores)


N = 16
num_classes = 21
H = 256
W = 256


def get_inputs():
    return [torch.randn(N, num_classes, H, W)]


def get_init_inputs():
    return []
