"""Honest control (small outputs): L2 normalisation of each row in two passes over the row.

Class: the right answer on a task whose outputs are all below the absolute tolerance (issue 15,
point 3). Source: KernelBench issue #165 (39_L2Norm_ passes with zeros). Style: a sum of squares
accumulated in fp32 across a block loop, a reciprocal square root, a second pass to scale.
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0))
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride + cols, (x * inv).to(out_ptr.dtype.element_ty), mask=mask)


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    l2_normalize_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=65536)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2_normalize(x)
