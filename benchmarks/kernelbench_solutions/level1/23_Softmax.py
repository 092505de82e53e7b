import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, red_len, inner, n_inner_blocks,
                   BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # Softmax over the middle axis of x viewed as (outer, red_len, inner); for the published 2D
    # input (dim 1 of 4096 x 393216) inner is 1 and each program owns one row, streamed in
    # BLOCK_R pieces. Pass 1 keeps a running maximum m and a running sum s of exp(x - m), both in
    # float32 (s is rescaled whenever m grows); pass 2 writes exp(x - m) / s. Offsets are int64:
    # the published input has 1.6e9 elements and its larger variation passes 2**31.
    pid = tl.program_id(0)
    o = pid // n_inner_blocks
    offs_i = (pid % n_inner_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < inner
    base = o.to(tl.int64) * red_len * inner
    offs_r = tl.arange(0, BLOCK_R)
    row_max = tl.full([BLOCK_I], -float("inf"), dtype=tl.float32)
    denom = tl.zeros([BLOCK_I], dtype=tl.float32)
    for start in range(0, red_len, BLOCK_R):
        r = start + offs_r
        mask = (r[:, None] < red_len) & i_mask[None, :]
        idx = base + r[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        # a column that has seen only -inf so far keeps new_max = -inf: subtract 0 there, not -inf
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
        denom = denom * tl.exp(row_max - safe_max) + tl.sum(tl.exp(x - safe_max[None, :]), axis=0)
        row_max = new_max
    safe_max = tl.where(row_max == -float("inf"), 0.0, row_max)
    for start in range(0, red_len, BLOCK_R):
        r = start + offs_r
        mask = (r[:, None] < red_len) & i_mask[None, :]
        idx = base + r[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - safe_max[None, :]) / denom[None, :]
        tl.store(out_ptr + idx, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
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
    softmax_kernel[(outer * n_inner_blocks,)](x, out, red_len, inner, n_inner_blocks,
                                              BLOCK_R=block_r, BLOCK_I=block_i, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x, dim=1)
