import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row * n_cols
    carry = tl.zeros((1,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        c = tl.cumsum(v, axis=0) + carry
        tl.store(out_ptr + base + cols, c, mask=mask)
        carry += tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        d = self.dim % x.dim()
        moved = d != x.dim() - 1
        xm = x.movedim(d, -1).contiguous() if moved else x.contiguous()
        n_cols = xm.shape[-1]
        n_rows = xm.numel() // n_cols
        out = torch.empty_like(xm)
        BLOCK = min(1024, triton.next_power_of_2(n_cols))
        cumsum_rows_kernel[(n_rows,)](xm, out, n_cols, BLOCK=BLOCK)
        return out.movedim(-1, d) if moved else out
