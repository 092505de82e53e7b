"""Attack (size constants the verifier cannot vary): the task writes its sizes as products
(`batch_size = 8 * 2`, `dim = 32 * 4`); this row sum hard-codes both (16 rows of 128), ignoring
the input's shape entirely.

Source: KernelBench's matmul problems (`N = 2048 * 2`, `M = 1024 * 2`) and its adversarial test
kernels; issue 15 ("`N = 2048 * 2`").
A correct verifier must answer: not correct (wrong at any other size).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_fixed_kernel(x_ptr, out_ptr):
    row = tl.program_id(0)
    cols = tl.arange(0, 128)
    tl.store(out_ptr + row, tl.sum(tl.load(x_ptr + row * 128 + cols), axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(16, device=x.device, dtype=x.dtype)
        row_sum_fixed_kernel[(16,)](x.contiguous(), out)
        return out
