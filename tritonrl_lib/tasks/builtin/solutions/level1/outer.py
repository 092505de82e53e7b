import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def outer_kernel(a_ptr, b_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Each program writes one (BLOCK_M, BLOCK_N) tile: a column slice times a row slice.
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    a = tl.load(a_ptr + offs_m, mask=offs_m < M, other=0.0)
    b = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    tile = a[:, None] * b[None, :]
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(out_ptrs, tile, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dim() == 1 and b.dim() == 1, "outer expects two vectors"
    a, b = a.contiguous(), b.contiguous()
    M, N = a.numel(), b.numel()
    out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    block_m, block_n = 32, 128
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    outer_kernel[grid](a, b, out, M, N, BLOCK_M=block_m, BLOCK_N=block_n)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return outer(a, b)
