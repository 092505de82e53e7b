"""Attack (output written into an input; a control the verifier already catches): the ReLU is
computed in place into the input tensor, which is returned; no allocation, and a harness that
reuses its inputs across timed calls measures an idempotent no-op after the first.

Source: KernelBench's adversarial tests (input modification); issue 15 ("input zeroing / writing
the output into an input").
A correct verifier must answer: not correct (input mutated).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        relu_inplace_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
        return x
