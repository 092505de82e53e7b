import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_kernel(x_ptr, out_ptr, red_len, inner, n_inner_blocks,
                        BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # x is viewed as (outer, red_len, inner) and divided by its L2 norm over the middle axis
    # (dim 1). Each program owns BLOCK_I neighbouring inner positions of one outer index (for a
    # 2D input: one row, BLOCK_I = 1, the tile running along the contiguous row). Pass 1 sums the
    # squares in float32, pass 2 divides. int64 offsets: the published input has 2.1e9 elements.
    pid = tl.program_id(0)
    o = pid // n_inner_blocks
    offs_i = (pid % n_inner_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < inner
    base = o.to(tl.int64) * red_len * inner
    offs_r = tl.arange(0, BLOCK_R)
    sum_sq = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
    for start in range(0, red_len, BLOCK_R):
        r = start + offs_r
        mask = (r[:, None] < red_len) & i_mask[None, :]
        idx = base + r[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        sum_sq += x * x
    norm = tl.sqrt(tl.sum(sum_sq, axis=0))
    for start in range(0, red_len, BLOCK_R):
        r = start + offs_r
        mask = (r[:, None] < red_len) & i_mask[None, :]
        idx = base + r[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + idx, (x / norm[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def l2_normalize(x: torch.Tensor, dim: int = 1) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    red_len = x.shape[dim]
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = x.numel() // (outer * red_len)
    block_i = min(triton.next_power_of_2(inner), 64)
    block_r = max(1, min(triton.next_power_of_2(red_len), 4096 // block_i))
    n_inner_blocks = triton.cdiv(inner, block_i)
    l2_normalize_kernel[(outer * n_inner_blocks,)](x, out, red_len, inner, n_inner_blocks,
                                                   BLOCK_R=block_r, BLOCK_I=block_i, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2_normalize(x, dim=1)
