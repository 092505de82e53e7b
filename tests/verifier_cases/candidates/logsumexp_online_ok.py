"""Honest control: logsumexp over a row in tiles of 512 with a scalar running maximum, the running sum
rescaled to each new maximum (an online logsumexp). A correct verifier must answer: correct."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lse_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * n_cols
    row_max = -float("inf")
    denom = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        denom = denom * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        row_max = new_max
    tl.store(out_ptr + row, row_max + tl.log(denom))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        lse_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=512)
        return out
