import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_epilogue_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                           stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                           scale, lo, hi,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           DOT_PRECISION: tl.constexpr):
    """out = gelu(clamp((x @ w.T + b) * scale, lo, hi)), w laid out as nn.Linear's (N, K)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        # w^T tile: element (k, n) is w[n, k]
        b = tl.load(w_ptr + rn[None, :] * stride_wn + kk[:, None] * stride_wk,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=DOT_PRECISION)
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    y = (acc + bias[None, :]) * scale
    y = tl.minimum(tl.maximum(y, lo), hi)
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale, clamp_min, clamp_max):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.scale = float(scale)
        self.clamp_min = float(clamp_min)
        self.clamp_max = float(clamp_max)

    def forward(self, x):
        w, b = self.proj.weight, self.proj.bias
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
        # full float32 products: with TF32 the pre-activation's rounding error grows with the input
        # scale while the clamp keeps the output (and so the tolerance) small
        precision = "ieee" if x.dtype == torch.float32 else "tf32"
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_epilogue_kernel[grid](x, w, b, out, M, N, K,
                                     x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                     out.stride(0), out.stride(1),
                                     self.scale, self.clamp_min, self.clamp_max,
                                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                     DOT_PRECISION=precision)
        return out
