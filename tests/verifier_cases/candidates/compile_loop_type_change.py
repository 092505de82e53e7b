"""A loop-carried accumulator that starts as a Python int and becomes a float: the interpreter
does not care, the compiler needs one type per loop-carried value. Expected: compile_error."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    total = 0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        total += tl.sum(tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0), axis=0)
    tl.store(out_ptr + row, total)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        row_sum_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK_SIZE=32)
        return out
