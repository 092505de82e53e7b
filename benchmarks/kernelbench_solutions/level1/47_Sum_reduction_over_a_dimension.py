import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, red_len, inner, n_inner_blocks,
                   BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # x is viewed as (outer, red_len, inner) and summed over the middle axis. Each program owns
    # BLOCK_I neighbouring inner positions of one outer index and walks the reduced axis in
    # [BLOCK_R, BLOCK_I] tiles (rows of the tile are contiguous in memory when inner > 1; when
    # inner == 1, BLOCK_I is 1 and the tile runs along the contiguous reduced axis instead).
    # Partial sums stay in a float32 tile and are reduced once at the end.
    pid = tl.program_id(0)
    o = pid // n_inner_blocks
    offs_i = (pid % n_inner_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < inner
    base = o.to(tl.int64) * red_len * inner
    offs_r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
    for start in range(0, red_len, BLOCK_R):
        r = start + offs_r
        mask = (r[:, None] < red_len) & i_mask[None, :]
        idx = base + r[:, None].to(tl.int64) * inner + offs_i[None, :]
        acc += tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + o.to(tl.int64) * inner + offs_i, total.to(out_ptr.dtype.element_ty), mask=i_mask)


def sum_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    dim = dim % x.dim()
    x = x.contiguous()
    red_len = x.shape[dim]
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    out_shape = list(x.shape)
    out_shape[dim] = 1  # keepdim=True
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    block_i = min(triton.next_power_of_2(inner), 128)
    block_r = max(1, min(triton.next_power_of_2(max(red_len, 1)), 4096 // block_i))
    n_inner_blocks = triton.cdiv(inner, block_i)
    sum_dim_kernel[(outer * n_inner_blocks,)](x, out, red_len, inner, n_inner_blocks,
                                              BLOCK_R=block_r, BLOCK_I=block_i, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_dim(x, self.dim)
