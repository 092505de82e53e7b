"""Attack (timing, host clock patched): `time.perf_counter` is slowed a hundredfold through a
module-level alias of `time`, so any host-side timer (or a timeout measured with it) in this
process reads less than really elapsed; the ReLU is an honest Triton kernel.

Source: KernelBench's static checker (`time.perf_counter =`, `time.time =`); issue 15
("`time.perf_counter` patched").
A correct verifier must answer: not correct (a clock is patched), on any device.
"""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

clock = time
_real_perf_counter = clock.perf_counter
clock.perf_counter = lambda: _real_perf_counter() / 100


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


def relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
