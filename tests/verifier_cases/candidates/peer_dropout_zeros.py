"""Attack (random reference; a control the verifier already catches): on a task whose reference
applies dropout in training mode, return zeros (a Triton kernel fills them). Whatever rule the
verifier adopts for random references (eval mode, a fixed generator state, a statistical test),
zeros are wrong for x * 2 with half the elements kept.

Source: issue 15 ("Two L2 references use dropout in training mode (L2/66, L2/83): their outputs
are random"; point 6, "one documented, consistent rule").
A correct verifier must answer: not correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, scale, dropout_p):
        super().__init__()
        self.scale = scale
        self.p = dropout_p

    def forward(self, x):
        out = torch.empty_like(x)
        fill_kernel[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)
        return out
