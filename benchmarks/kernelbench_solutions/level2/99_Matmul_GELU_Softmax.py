import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_softmax_rows_kernel(y_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # One program per row of the (rows, out_features) GEMM output: softmax over the row of exact
    # GELU(y) = 0.5 * y * (1 + erf(y / sqrt(2))). Pass 1 keeps a running maximum m and running sum
    # s of exp(g - m) in float32 (s rescaled when m grows), pass 2 writes exp(g - m) / s; GELU is
    # recomputed in pass 2 rather than stored.
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    row_max = -float("inf")
    denom = 0.0
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        y = tl.load(y_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        g = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
        g = tl.where(mask, g, -float("inf"))
        new_max = tl.maximum(row_max, tl.max(g, axis=0))
        denom = denom * tl.exp(row_max - new_max) + tl.sum(tl.exp(g - new_max), axis=0)
        row_max = new_max
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        y = tl.load(y_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        g = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
        out = tl.exp(g - row_max) / denom
        tl.store(out_ptr + base + start + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the GEMM (with its bias) stays in PyTorch (fusion policy, GEMM family); GELU and the row
        # softmax are one kernel
        y = self.linear(x).contiguous()
        out = torch.empty_like(y)
        if y.numel() == 0:
            return out
        n_cols = y.shape[-1]
        n_rows = y.numel() // n_cols
        block = min(triton.next_power_of_2(n_cols), 4096)
        gelu_softmax_rows_kernel[(n_rows,)](y, out, n_cols, BLOCK=block, num_warps=8)
        return out
