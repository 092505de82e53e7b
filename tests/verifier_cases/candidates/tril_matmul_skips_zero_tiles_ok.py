"""Honest: A and B are lower triangular, as the task states; the k loop skips the zero tiles."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tril_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A, B lower triangular (as the task states): C[i, j] = sum_{j <= k <= i} A[i, k] B[k, j].
    # Tiles above the diagonal are zero; the k loop only visits [col tile start, row tile end].
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if pm * BM + BM > pn * BN:
        k_lo = (pn * BN) // BK * BK
        k_hi = tl.minimum(pm * BM + BM, N)
        for k0 in range(k_lo, k_hi, BK):
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * N + kk[None, :], mask=(rm[:, None] < N) & (kk[None, :] < N) & (kk[None, :] <= rm[:, None]), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < N) & (rn[None, :] < N) & (kk[:, None] >= rn[None, :]), other=0.0)
            acc += tl.dot(a, b)
    acc = tl.where(rm[:, None] >= rn[None, :], acc, 0.0)
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
        tril_matmul_kernel[grid](A, B, C, N, BM=32, BN=32, BK=16)
        return C
