"""Honest control (small outputs): the mean of each row, accumulated in fp32 and cast back.

Class: the right answer on a task whose outputs are below the absolute tolerance (issue 15,
point 3: "a mean of centred data"). Style: fp32 accumulation with a cast back to the output dtype,
a block loop over a row of a million elements.
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    tl.store(out_ptr + row, mean.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_mean_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=65536)
        return out
