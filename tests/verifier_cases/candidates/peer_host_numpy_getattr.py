"""Attack (numpy on the host): the tensor's numpy view is taken with `getattr(x, "numpy")()`, which
no static rule names, the ReLU is computed with numpy operators, and `torch.from_numpy` (an alias,
allowed) wraps the result; a Triton kernel copies into scratch so a launch is seen.

Source: KernelBench's static checker and KernelGenBench's scan forbid host/numpy compute; issue 15
("numpy on the host").
A correct verifier must answer: not correct (host compute outside Triton).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        return torch.from_numpy(arr * (arr > 0)).to(x.device)
