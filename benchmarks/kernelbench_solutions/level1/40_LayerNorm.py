import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_stats_kernel(x_ptr, mean_ptr, m2_ptr, n_cols, n_chunks,
                            CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # Pass 1 of 2. A row (one sample, n_cols = prod(normalized_shape) values, 4.2M in the published
    # task) is split into chunks so that many programs share it. Each program reads its chunk
    # once, BLOCK values at a time: a block's own mean and sum of squared deviations are combined
    # into the running ones with Chan's parallel rule (no E[x^2] - E[x]^2 cancellation), then the
    # chunk's mean and M2 are stored.
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid % n_chunks
    chunk_start = chunk.to(tl.int64) * CHUNK
    row_base = row.to(tl.int64) * n_cols
    offs = tl.arange(0, BLOCK)
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for start in range(0, CHUNK, BLOCK):
        col = chunk_start + start + offs
        mask = col < n_cols
        x = tl.load(x_ptr + row_base + col, mask=mask, other=0.0).to(tl.float32)
        n_b = tl.sum(mask.to(tl.float32), axis=0)
        mean_b = tl.sum(x, axis=0) / tl.maximum(n_b, 1.0)
        dev = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(dev * dev, axis=0)
        total = count + n_b
        delta = mean_b - mean
        frac = n_b / tl.maximum(total, 1.0)
        mean = mean + delta * frac
        m2 = m2 + m2_b + delta * delta * count * frac
        count = total
    tl.store(mean_ptr + pid, mean)
    tl.store(m2_ptr + pid, m2)


@triton.jit
def layer_norm_apply_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, m2_ptr, n_cols, n_chunks, eps,
                            HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                            CHUNK: tl.constexpr, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    # Pass 2 of 2. Each program first combines its row's chunk statistics (a few hundred numbers:
    # the row mean as the count-weighted mean of chunk means, then M2 as the chunks' M2 plus
    # count * (chunk mean - row mean)^2), then normalises its own chunk with the affine weights.
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid % n_chunks
    offs_p = tl.arange(0, BLOCK_P)
    stats = row.to(tl.int64) * n_chunks
    weighted = tl.zeros([BLOCK_P], dtype=tl.float32)
    for start in range(0, n_chunks, BLOCK_P):
        p = start + offs_p
        pmask = p < n_chunks
        cnt = tl.minimum(n_cols - p.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        cnt = tl.where(pmask, cnt, 0.0)
        weighted += cnt * tl.load(mean_ptr + stats + p, mask=pmask, other=0.0)
    mean = tl.sum(weighted, axis=0) / n_cols
    spread = tl.zeros([BLOCK_P], dtype=tl.float32)
    for start in range(0, n_chunks, BLOCK_P):
        p = start + offs_p
        pmask = p < n_chunks
        cnt = tl.minimum(n_cols - p.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        cnt = tl.where(pmask, cnt, 0.0)
        d = tl.load(mean_ptr + stats + p, mask=pmask, other=0.0) - mean
        spread += tl.load(m2_ptr + stats + p, mask=pmask, other=0.0) + cnt * d * d
    rstd = 1.0 / tl.sqrt(tl.sum(spread, axis=0) / n_cols + eps)

    chunk_start = chunk.to(tl.int64) * CHUNK
    row_base = row.to(tl.int64) * n_cols
    offs = tl.arange(0, BLOCK)
    for start in range(0, CHUNK, BLOCK):
        col = chunk_start + start + offs
        mask = col < n_cols
        x = tl.load(x_ptr + row_base + col, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + col, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + col, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row_base + col, y.to(out_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, normalized_shape: tuple, weight, bias, eps: float) -> torch.Tensor:
    n_cols = 1
    for s in normalized_shape:
        n_cols *= s
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    n_rows = x.numel() // n_cols
    chunk = min(16384, triton.next_power_of_2(n_cols))
    block = min(chunk, 2048)
    n_chunks = triton.cdiv(n_cols, chunk)
    block_p = min(triton.next_power_of_2(n_chunks), 1024)
    mean = torch.empty(n_rows * n_chunks, dtype=torch.float32, device=x.device)
    m2 = torch.empty(n_rows * n_chunks, dtype=torch.float32, device=x.device)
    grid = (n_rows * n_chunks,)
    layer_norm_stats_kernel[grid](x, mean, m2, n_cols, n_chunks, CHUNK=chunk, BLOCK=block, num_warps=8)
    w = weight.contiguous() if weight is not None else x
    b = bias.contiguous() if bias is not None else x
    layer_norm_apply_kernel[grid](x, w, b, out, mean, m2, n_cols, n_chunks, float(eps),
                                  HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
                                  CHUNK=chunk, BLOCK=block, BLOCK_P=block_p, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        # the same submodule as the reference, so its weight and bias (ln.weight, ln.bias) load
        # from the reference's state_dict; forward never calls it, the kernels read its parameters
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.ln
        return layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
