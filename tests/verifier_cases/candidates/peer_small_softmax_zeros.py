"""Attack (tiny output passing by absolute tolerance): a softmax over a 65,536-wide row of [0, 1)
inputs returns zeros (written by a Triton kernel): every true value is ~1.5e-5, far below atol.

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
def fill_kernel(out_ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32) + value, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        fill_kernel[(triton.cdiv(out.numel(), 4096),)](out, 0.0, out.numel(), BLOCK=4096)
        return out
