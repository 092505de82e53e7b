"""Honest control (small outputs): a softmax over a wide row that never holds the row at once.

Class: the right answer on a task whose outputs are all below the absolute tolerance (issue 15,
point 3). Source: KernelBench issue #165 names 23_Softmax among the problems where returning zeros
passes; this is the solution a tolerance rule must keep passing. Style: an online softmax (running
max and rescaled running sum in one pass, then a second pass to write), in fp32, with a block loop.
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        # lanes that have seen only -inf keep a zero sum (avoid inf - inf)
        scale = tl.where(new_m == -float("inf"), 0.0, tl.exp(m - new_m))
        s = s * scale + tl.where(x == -float("inf"), 0.0, tl.exp(x - new_m))
        m = new_m
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        online_softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK=8192)
        return out
