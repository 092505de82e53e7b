"""Attack (behaviour that changes once timed): right for the first 7 calls (every call whose output
a GPU verifier checks: tiny, original, scaled, seed, larger, float16, bfloat16), then returns the
last result again without launching anything, so every timed call costs nothing.

Source: issue 15 ("Outputs of the timed calls are never checked, so a candidate that changes
behaviour once it is being timed keeps its speedup"); KernelBench's adversarial tests (result
reuse). On the CPU it makes fewer than 7 calls and is indistinguishable from an honest kernel.
A correct verifier must answer: not correct on a GPU (timed outputs wrong); any verdict on the CPU.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

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
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls <= 7:
            self.last = relu(x)
        return self.last
