"""Honest: the GEMM, the bias and the tanh fused in one Triton kernel, `tl.dot` at Triton's default precision
(TF32 on a GPU). Triton's CPU interpreter computes tl.dot in float32, so the kernel rounds its operands to TF32
itself (10 mantissa bits, to nearest even, as the GPU's tensor cores take them): on the CPU it computes what
it computes on a GPU. TF32's rounding through tanh is beyond the float32 tolerance on the range set (inputs x
2**6); the verdict must be correct, held to TF32's own error there, and say `precision: tf32`."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def to_tf32(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


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
        acc += tl.dot(to_tf32(a.to(tl.float32)), to_tf32(w.to(tl.float32)))
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
