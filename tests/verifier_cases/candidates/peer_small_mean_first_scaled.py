"""Attack (tiny output passing by absolute tolerance): the mean of each row of centred data returns the
row's first element times 1e-7: input-dependent, tiny, wrong.

Source: KernelBench issue #165 ("Correctness check can be passed by returning zeros on 4 of 60
level-1 problems": 23_Softmax, 37_FrobeniusNorm_, 39_L2Norm_, 53_Min_reduction); issue 15
("A kernel returning `x * 1e-7` passes a softmax over 16,384 features").
A correct verifier must answer: not correct (the outputs are wrong at the reference's own scale).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def first_scaled_kernel(x_ptr, out_ptr, stride, factor):
    row = tl.program_id(0)
    tl.store(out_ptr + row, tl.load(x_ptr + row * stride) * factor)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        first_scaled_kernel[(x.shape[0],)](x, out, x.stride(0), 1e-7)
        return out
