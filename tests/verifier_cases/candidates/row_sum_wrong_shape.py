import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    """Wrong shape: keeps the reduced dimension, (batch, 1) instead of (batch,)."""

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, 1), device=x.device, dtype=x.dtype)
        row_sum_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
