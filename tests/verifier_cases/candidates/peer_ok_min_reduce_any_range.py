"""Honest control (small outputs, any input range): a min over dimension 1 that starts from +inf.

Class: the right answer on a task whose outputs are below the absolute tolerance (issue 15,
point 3), written for any input range (point 4), not only the [0, 1) the task draws. Source:
KernelBench issue #165 (53_Min_reduction_over_a_dimension passes with zeros).
A correct verifier must answer: correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_min_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full((BLOCK,), float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=float("inf"))
        acc = tl.minimum(acc, x.to(tl.float32))
    tl.store(out_ptr + row, tl.min(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the kernel reduces the last dimension of a 2-D tensor: move the reduced one there
        x = x.movedim(self.dim, -1).contiguous()
        rows = x.reshape(-1, x.shape[-1])
        out = torch.empty(rows.shape[0], device=x.device, dtype=x.dtype)
        row_min_kernel[(rows.shape[0],)](rows, out, rows.shape[1], rows.stride(0), BLOCK=1024)
        return out.reshape(x.shape[:-1])
