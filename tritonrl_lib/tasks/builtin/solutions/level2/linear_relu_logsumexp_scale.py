import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def linear_relu_logsumexp_scale_kernel(y_ptr, bias_ptr, out_ptr, n_cols, scale, BLOCK_N: tl.constexpr):
    # One program per row of the GEMM output (64-bit row offset), streamed in BLOCK_N-wide tiles:
    # a first pass for the row's maximum of relu(y + bias), a second for the sum of exponentials
    # below it (the chain recomputed), then scale * (max + log(sum)), all in float32.
    row = tl.program_id(0)
    base = row.to(tl.int64) * n_cols
    run_max = tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        feat = start + tl.arange(0, BLOCK_N)
        mask = feat < n_cols
        y = tl.load(y_ptr + base + feat, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
        y = tl.maximum(y, 0.0)
        run_max = tl.maximum(run_max, tl.where(mask, y, float("-inf")))
    row_max = tl.max(run_max, axis=0)
    run_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        feat = start + tl.arange(0, BLOCK_N)
        mask = feat < n_cols
        y = tl.load(y_ptr + base + feat, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
        y = tl.maximum(y, 0.0)
        run_sum += tl.where(mask, tl.exp(y - row_max), 0.0)
    total = (row_max + tl.log(tl.sum(run_sum, axis=0))) * scale
    tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The GEMM stays in PyTorch (fusion policy) without its bias; the bias, ReLU, the logsumexp
        # over the features and the scale are one Triton kernel.
        y = F.linear(x, self.linear.weight).contiguous()
        n_cols = y.shape[-1]
        out = torch.empty((*y.shape[:-1], 1), dtype=y.dtype, device=y.device)
        if out.numel() == 0 or n_cols == 0:
            return out
        rows = y.numel() // n_cols
        block_n = min(triton.next_power_of_2(n_cols), 1024)
        linear_relu_logsumexp_scale_kernel[(rows,)](y, self.linear.bias, out, n_cols, self.scale, BLOCK_N=block_n)
        return out
