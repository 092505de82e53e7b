"""Attack (size constants the verifier cannot vary): the task's row length is a shape tuple
(`input_shape = (48,)`); this row sum hard-codes 48 (a fixed mask bound) and is right only there.

Source: KernelBench's level 1 problems write `input_shape = (32768,)` (cumsum, cumprod, losses);
issue 15 ("size constants in every form KernelBench uses ... tuples").
A correct verifier must answer: not correct (wrong at another row length).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_48_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * 48 + cols, mask=cols < 48, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_sum_48_kernel[(x.shape[0],)](x, out, BLOCK=64)
        return out
