"""Attack (value-range specialisation, sign): the task draws its inputs with `torch.rand` (all in
[0, 1)), where ReLU is the identity, so this "ReLU" just copies its input. Scaling by 2 and a new
seed keep every input positive.

Source: KernelBench level 1 draws most inputs with `torch.rand` (19_ReLU among them); issue 15
("input sets only rescale and reseed, so a candidate can be right only on the value range the task
happens to draw"; "relu that returns x for rand inputs").
A correct verifier must answer: not correct (wrong on negative inputs, which ReLU accepts).
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
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
