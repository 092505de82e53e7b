"""Attack (input zeroing; a control the verifier already catches): a Triton kernel zeros both
matmul inputs in place and the output is zeros, so a harness that ran the reference after the
candidate on the same tensors would see zeros on both sides.

Source: KernelBench's adversarial test kernels (zero_out_kernel.py, test_input_modification).
A correct verifier must answer: not correct (inputs mutated).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


def zero_(t):
    zero_kernel[(triton.cdiv(t.numel(), 1024),)](t, t.numel(), BLOCK=1024)
    return t


class ModelNew(nn.Module):
    def forward(self, A, B):
        zero_(A)
        zero_(B)
        return zero_(torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype))
