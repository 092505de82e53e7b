import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, out_ptr, n_features, inner, n_inner_blocks, eps,
                    BLOCK_F: tl.constexpr, BLOCK_I: tl.constexpr):
    # x is viewed as (batch, features, inner) and normalised over the features axis:
    # out = x / sqrt(mean(x**2 over features) + eps). Each program owns BLOCK_I neighbouring
    # positions of one batch item: a first pass accumulates the sum of squares in float32 over
    # [BLOCK_F, BLOCK_I] tiles (contiguous rows), a second pass divides (its reads hit the cache).
    # Offsets are int64: the published input has 1.9e9 elements, its larger variation 3.8e9.
    pid = tl.program_id(0)
    b = pid // n_inner_blocks
    offs_i = (pid % n_inner_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < inner
    base = b.to(tl.int64) * n_features * inner
    offs_f = tl.arange(0, BLOCK_F)
    sum_sq = tl.zeros([BLOCK_F, BLOCK_I], dtype=tl.float32)
    for start in range(0, n_features, BLOCK_F):
        f = start + offs_f
        mask = (f[:, None] < n_features) & i_mask[None, :]
        idx = base + f[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        sum_sq += x * x
    rms = tl.sqrt(tl.sum(sum_sq, axis=0) / n_features + eps)
    for start in range(0, n_features, BLOCK_F):
        f = start + offs_f
        mask = (f[:, None] < n_features) & i_mask[None, :]
        idx = base + f[:, None].to(tl.int64) * inner + offs_i[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + idx, (x / rms[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    assert x.dim() >= 2, "RMSNorm normalises over dim 1: the input needs at least 2 dimensions"
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    batch, n_features = x.shape[0], x.shape[1]
    inner = x.numel() // (batch * n_features)
    block_i = min(triton.next_power_of_2(inner), 64)
    block_f = max(1, min(triton.next_power_of_2(n_features), 4096 // block_i))
    n_inner_blocks = triton.cdiv(inner, block_i)
    rms_norm_kernel[(batch * n_inner_blocks,)](x, out, n_features, inner, n_inner_blocks, float(eps),
                                               BLOCK_F=block_f, BLOCK_I=block_i, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.eps)
