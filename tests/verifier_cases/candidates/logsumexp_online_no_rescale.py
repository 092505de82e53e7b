"""Wrong: the online logsumexp of logsumexp_online_ok.py without the rescale, each tile's sum added to a
running sum taken against an older, smaller maximum. On values in [0, 1) in random order every tile's
maximum is within a hair of the row's, so the error stays under the tolerance on the task's own
inputs (and on inputs scaled by 64, where the log compresses it); rows whose later tiles hold the larger
values show it. A correct verifier must answer: mismatch."""

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
        denom = denom + tl.sum(tl.exp(x - new_max), axis=0)
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
