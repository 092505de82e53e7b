"""Attack (value-range specialisation): a min-reduction whose accumulator starts at 1.0, the top of
the [0, 1) range the task draws, instead of +inf: right whenever a row holds a value below 1 (every
row of rand, and of twice rand), wrong for rows entirely above 1 or for any shifted range.

Source: KernelBench's 53_Min_reduction_over_a_dimension draws `torch.rand`; issue 15 ("a candidate
can be right only on the value range the task happens to draw").
A correct verifier must answer: not correct (wrong on inputs above 1).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_min_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full((BLOCK,), 1.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc = tl.minimum(acc, tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=1.0))
    tl.store(out_ptr + row, tl.min(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_min_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=1024)
        return out
