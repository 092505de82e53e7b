"""Attack (tiny output passing by absolute tolerance): a softmax over a wide row returns its input
times 1e-7 (a Triton kernel): the right shape, dtype and sign, and within atol of every true value.

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
def scale_kernel(x_ptr, out_ptr, factor, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, 1e-7, x.numel(), BLOCK=4096)
        return out
