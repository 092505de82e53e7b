import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, scan_len, inner, n_inner_blocks,
                  BLOCK_L: tl.constexpr, BLOCK_I: tl.constexpr):
    # Inclusive prefix sum along the middle axis of x viewed as (outer, scan_len, inner). Each
    # program scans BLOCK_I neighbouring inner positions of one outer index (for the published
    # 2D input, dim 1: one row, BLOCK_I = 1, tiles along the contiguous row), BLOCK_L steps at a
    # time: tl.cumsum within the tile plus `carry`, the float32 total of the tiles before.
    # int64 offsets: the published input has 1.07e9 elements, its larger variation 2.1e9.
    pid = tl.program_id(0)
    o = pid // n_inner_blocks
    offs_i = (pid % n_inner_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < inner
    base = o.to(tl.int64) * scan_len * inner
    offs_l = tl.arange(0, BLOCK_L)
    carry = tl.zeros([BLOCK_I], dtype=tl.float32)
    for start in range(0, scan_len, BLOCK_L):
        l = start + offs_l
        mask = (l[:, None] < scan_len) & i_mask[None, :]
        idx = base + l[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, axis=0) + carry[None, :]
        tl.store(out_ptr + idx, y.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    scan_len = x.shape[dim]
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = x.numel() // (outer * scan_len)
    block_i = min(triton.next_power_of_2(inner), 64)
    block_l = max(1, min(triton.next_power_of_2(scan_len), 2048 // block_i))
    n_inner_blocks = triton.cdiv(inner, block_i)
    cumsum_kernel[(outer * n_inner_blocks,)](x, out, scan_len, inner, n_inner_blocks,
                                             BLOCK_L=block_l, BLOCK_I=block_i, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum(x, self.dim)
