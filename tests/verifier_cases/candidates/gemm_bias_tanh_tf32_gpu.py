"""Honest on a GPU: the GEMM, the bias and the tanh fused in one Triton kernel, `tl.dot` at Triton's default
precision (TF32). Its verdict says `precision: tf32`, and its speedup is the one against the reference timed
with TF32 allowed (precision-matched); the one against the float32 reference is reported beside it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_bias_tanh_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * K + ks[:, None], mask=(cols[None, :] < N) & (ks[:, None] < K), other=0.0)
        acc += tl.dot(a, w)
    z = acc + tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    y = 2.0 * tl.sigmoid(2.0 * z) - 1.0
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y.to(out_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        gemm_bias_tanh_kernel[grid](x, self.linear.weight, self.linear.bias, out, M, N, K, BLOCK_M=16, BLOCK_N=16,
                                    BLOCK_K=32)
        return out
