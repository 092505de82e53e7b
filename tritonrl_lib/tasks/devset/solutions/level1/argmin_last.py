import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmin_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * n_cols
    best_val = tl.full((BLOCK,), float("inf"), tl.float32)
    best_idx = tl.full((BLOCK,), 2147483647, tl.int32)
    # each lane keeps its own running minimum (strict <: the earliest index wins ties)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < n_cols, other=float("inf")).to(tl.float32)
        better = v < best_val
        best_val = tl.where(better, v, best_val)
        best_idx = tl.where(better, cols, best_idx)
    m = tl.min(best_val, axis=0)
    idx = tl.min(tl.where(best_val == m, best_idx, 2147483647), axis=0)
    tl.store(out_ptr + row, idx.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, input_tensor):
        x = input_tensor
        d = self.dim % x.dim()
        if d != x.dim() - 1:
            x = x.movedim(d, -1)
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        out = torch.empty(x.shape[:-1], device=x.device, dtype=torch.int64)
        BLOCK = min(1024, triton.next_power_of_2(n_cols))
        argmin_rows_kernel[(n_rows,)](x, out, n_cols, BLOCK=BLOCK)
        return out
