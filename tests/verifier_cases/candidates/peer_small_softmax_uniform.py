"""Attack (tiny output passing by absolute tolerance): a softmax over a wide row returns 1 / width, the mean
of the true answer, plus the input times 1e-9 (so no two input sets give bit-identical outputs): it
sums to one per row, within rounding, and is within atol everywhere.

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
def near_constant_kernel(x_ptr, out_ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, value + tl.load(x_ptr + offs, mask=mask) * 1e-9, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        near_constant_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, 1.0 / x.shape[1], x.numel(), BLOCK=4096)
        return out
