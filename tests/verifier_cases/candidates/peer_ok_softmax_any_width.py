"""Honest control (size constants): a softmax over the last dimension that reads every size from the
input (any number of leading dimensions, any width up to one block per row).

Class: the right answer on the tasks whose sizes the verifier may vary in new ways (issue 15,
point 4); it must keep passing when `height = width = 16` is varied.
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax_last_dim(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_cols = x.shape[-1]
    out = torch.empty_like(x)
    softmax_rows_kernel[(x.numel() // n_cols,)](x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax_last_dim(x)
