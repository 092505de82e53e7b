import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # x viewed as (outer, R, inner), contiguous; one program per (outer index, block of inner)
    o = tl.program_id(0)
    ib = tl.program_id(1)
    cols = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    col_mask = cols < inner
    acc = tl.zeros((BLOCK_I,), dtype=tl.float32)
    base = x_ptr + o * R * inner
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < R) & col_mask[None, :]
        tile = tl.load(base + rows[:, None] * inner + cols[None, :], mask=m, other=0.0).to(tl.float32)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + o * inner + cols, acc, mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = list(x.shape)
        outer = 1
        for s in shape[:d]:
            outer *= s
        inner = 1
        for s in shape[d + 1:]:
            inner *= s
        R = shape[d]
        out_shape = shape[:d] + [1] + shape[d + 1:]
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_I = 32, 128
        grid = (outer, triton.cdiv(inner, BLOCK_I))
        sum_dim_kernel[grid](x, out, R, inner, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)
        return out
