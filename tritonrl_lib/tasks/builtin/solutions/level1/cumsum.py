import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n_pos, scan_len, inner, BLOCK_L: tl.constexpr, BLOCK_P: tl.constexpr):
    # x is viewed as (outer, scan_len, inner): position p = o * inner + i scans x[o, :, i].
    # Each program scans BLOCK_P positions, BLOCK_L steps at a time;
    # `carry` holds the totals of the blocks already done.
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    p_mask = offs_p < n_pos
    base = (offs_p // inner).to(tl.int64) * scan_len * inner + offs_p % inner
    offs_l = tl.arange(0, BLOCK_L)
    carry = tl.zeros([BLOCK_P], dtype=tl.float32)
    for start in range(0, scan_len, BLOCK_L):
        l = start + offs_l
        mask = (l[:, None] < scan_len) & p_mask[None, :]
        idx = base[None, :] + l[:, None] * inner
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, axis=0) + carry[None, :]
        tl.store(out_ptr + idx, y, mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    out = torch.empty_like(x)
    scan_len = x.shape[dim]
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    n_pos = x.numel() // max(scan_len, 1)
    # many contiguous positions per program when inner > 1; a few long rows when inner == 1
    if inner > 1:
        block_p, block_l = 64, min(triton.next_power_of_2(scan_len), 64)
    else:
        block_p, block_l = 16, min(triton.next_power_of_2(scan_len), 256)
    grid = (triton.cdiv(n_pos, block_p),)
    cumsum_kernel[grid](x, out, n_pos, scan_len, inner, BLOCK_L=block_l, BLOCK_P=block_p)
    return out


class ModelNew(nn.Module):
    def __init__(self, scan_dim: int):
        super(ModelNew, self).__init__()
        self.scan_dim = scan_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum(x, self.scan_dim)
