import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def linear_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + kk[:, None] * stride_wk,
                    mask=(offs_n[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(x, w)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    y = _gelu(acc + bias[None, :])
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn, y,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    """GEMM + bias + GELU in one kernel. nn.Linear only holds the weights (never called), so
    the reference's state_dict loads as is."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = math.sqrt(2.0)

    def _launch(self, x):
        M, K = x.shape
        N = self.linear.out_features
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        w = self.linear.weight
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        linear_gelu_kernel[grid](x, w, self.linear.bias, y, M, N, K,
                                 x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                 y.stride(0), y.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return y

    def forward(self, x):
        with torch.no_grad():
            return self._launch(x.contiguous())
