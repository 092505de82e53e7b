import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_bias_softmax_scale_kernel(y_ptr, bias_ptr, out_ptr, n_cols, scale, BLOCK_N: tl.constexpr):
    # One program per row of the GEMM output (64-bit row offset), streamed in BLOCK_N-wide tiles:
    # one pass keeps an online maximum and sum of exponentials per lane (rescaled when the maximum
    # grows), the lanes are combined, then a second pass writes scale * exp(y - max) / sum.
    row = tl.program_id(0)
    base = row.to(tl.int64) * n_cols
    run_max = tl.full((BLOCK_N,), -1.0e30, dtype=tl.float32)
    run_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        feat = start + tl.arange(0, BLOCK_N)
        mask = feat < n_cols
        y = tl.load(y_ptr + base + feat, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
        y = tl.where(mask, y, -1.0e30)
        new_max = tl.maximum(run_max, y)
        # a lane past the end keeps its maximum and sum (it adds nothing)
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.where(mask, tl.exp(y - new_max), 0.0)
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    row_sum = tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
    factor = scale / row_sum
    for start in range(0, n_cols, BLOCK_N):
        feat = start + tl.arange(0, BLOCK_N)
        mask = feat < n_cols
        y = tl.load(y_ptr + base + feat, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(y - row_max) * factor
        tl.store(out_ptr + base + feat, p.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The GEMM stays in PyTorch (fusion policy); the bias, the softmax over the features and the
        # scale are one Triton kernel.
        y = self.linear(x).contiguous()
        out = torch.empty_like(y)
        n_cols = y.shape[-1]
        if out.numel() == 0:
            return out
        rows = y.numel() // n_cols
        block_n = min(triton.next_power_of_2(n_cols), 1024)
        linear_bias_softmax_scale_kernel[(rows,)](y, self.bias.contiguous(), out, n_cols, self.scale,
                                                  BLOCK_N=block_n)
        return out
