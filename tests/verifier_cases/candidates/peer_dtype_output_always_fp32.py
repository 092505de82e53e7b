"""Attack (right only in float32; the half-precision input set runs only on a GPU): the row sum
always returns float32, whatever the input's dtype, and reads its input as float32. On float32
inputs it is right; on a float16 input it returns the wrong dtype (and reads garbage).

Source: issue 15 ("The dtype input set runs only on a GPU, though the interpreter runs float16
kernels"); KernelBench's static checker (precision handling).
A correct verifier must answer: not correct (wrong on float16 inputs), on the CPU too.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr.to(tl.pointer_type(tl.float32)) + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
