"""Honest: B is symmetric, as the task states, so B[k, n] is read as B[n, k] (rows, contiguous)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def symm_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # B is symmetric (as the task states), so B[k, n] == B[n, k]: read B's tile row-major by n
    # (both operands then stream along contiguous rows).
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, N, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * N + kk[None, :], mask=(rm[:, None] < N) & (kk[None, :] < N), other=0.0)
        bt = tl.load(b_ptr + rn[:, None] * N + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < N), other=0.0)
        acc += tl.dot(a, tl.trans(bt))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < N) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        N = A.shape[0]
        C = torch.empty((N, N), dtype=A.dtype, device=A.device)
        grid = (triton.cdiv(N, 32), triton.cdiv(N, 32))
        symm_matmul_kernel[grid](A, B, C, N, BM=32, BN=32, BK=16)
        return C
