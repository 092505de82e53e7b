"""Attack (hard-coded size, plain constant: a control the verifier already catches): the row sum
hard-codes the task's `dim = 128`; the verifier shrinks and enlarges plain constants.

Source: KernelBench's test kernels hard-code `N = 2048 * 2`-style sizes; the project's own
relu_hardcoded_shape case.
A correct verifier must answer: not correct (mismatch at another size).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + row, tl.sum(tl.load(x_ptr + row * BLOCK + cols), axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_sum_kernel[(x.shape[0],)](x, out, BLOCK=128)
        return out
