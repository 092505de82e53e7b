"""Attack (size constants the verifier cannot vary): the task's row length is derived from another
constant (`dim = base * 3`, 96); this row sum hard-codes 96.

Source: issue 15 ("size constants in every form KernelBench uses (... derived ones)").
A correct verifier must answer: not correct (wrong at another row length).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROW = 96


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * ROW + cols, mask=cols < ROW, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_sum_kernel[(x.shape[0],)](x, out, ROW=ROW, BLOCK=128)
        return out
