"""Attack (numpy on the host): a softmax computed with numpy ufuncs bound at import through
`functools.partial` (a call of a module-level name the static check cannot type); the array comes
from `getattr(x, "numpy")()`; a Triton kernel copies into scratch so a launch is seen.

Source: issue 15 ("numpy on the host"); KernelGenBench's scan ("import alias / getattr() bypass").
A correct verifier must answer: not correct (host compute outside Triton).
"""

import functools

import numpy
import torch
import torch.nn as nn
import triton
import triton.language as tl

row_max = functools.partial(numpy.max, axis=1, keepdims=True)
row_sum = functools.partial(numpy.sum, axis=1, keepdims=True)
exp = functools.partial(numpy.exp)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        scratch = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, scratch, x.numel(), BLOCK=1024)
        arr = getattr(x.cpu(), "numpy")()
        e = exp(arr - row_max(arr))
        return torch.from_numpy(e / row_sum(e)).to(x.device)
