"""Attack (host compute in a Python loop): each row is summed in Python from `.item()` reads of
its elements and the sums are rebuilt with `torch.tensor(list)`; a Triton kernel copies into
scratch so a launch is seen.

Source: issue 15 ("host-side Python loops per element rebuilt with torch.tensor(list)").
A correct verifier must answer: not correct (host compute outside Triton).
"""

import math

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
        sums = []
        for r in range(x.shape[0]):
            row = x[r]
            sums.append(math.fsum(row[c].item() for c in range(x.shape[1])))
        return torch.tensor(sums, dtype=x.dtype, device=x.device)
