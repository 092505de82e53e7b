"""Honest control (size constants): a sum over the last dimension for any row length (a block loop)
and any number of rows, read from the input.

Class: the right answer on the tasks whose sizes are written as tuples, products or derived
constants (issue 15, point 4); it must keep passing when those sizes are varied.
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        row_sum_kernel[(max(1, x.numel() // n_cols),)](x, out, n_cols, BLOCK=64)
        return out
