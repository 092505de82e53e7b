"""Honest control (random reference): scale-then-dropout as the reference computes it, following the
module's mode as nn.Dropout does: in training mode it keeps each element with probability 1 - p
(Triton's counter-based RNG, a fresh seed per call) and scales the kept ones by 1 / (1 - p); in
eval mode it only scales.

Class: issue 15, point 6 ("Random references (dropout in training mode and the like): one
documented, consistent rule; the verdict says when it applied"). The reference's output is random,
so an exact comparison fails this solution today whatever it does; under any sound rule (compare in
eval mode, or a statistical test of the mask) it is correct.
A correct verifier must answer: correct.
"""

import random

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_dropout_kernel(x_ptr, out_ptr, n, scale, p, seed, TRAINING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * scale
    if TRAINING:
        keep = tl.rand(seed, offs) >= p
        y = tl.where(keep, y / (1.0 - p), 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale, dropout_p):
        super().__init__()
        self.scale = scale
        self.p = dropout_p

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scale_dropout_kernel[(triton.cdiv(x.numel(), 1024),)](
            x, out, x.numel(), self.scale, self.p, random.randrange(1 << 30),
            TRAINING=self.training and self.p > 0, BLOCK=1024)
        return out
