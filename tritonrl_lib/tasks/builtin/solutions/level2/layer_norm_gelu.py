import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    # One program per row: mean, variance, then normalise + affine + GELU in the writing pass.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
        tl.store(out_row + start + cols, y, mask=mask)


def layer_norm_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    n_cols = weight.numel()
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows = x.numel() // n_cols
    block_size = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = 4 if block_size <= 1024 else 8
    layer_norm_gelu_kernel[(n_rows,)](x, weight, bias, out, n_cols, eps, BLOCK_SIZE=block_size, num_warps=num_warps)
    return out


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super(ModelNew, self).__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm_gelu(x, self.norm.weight, self.norm.bias, self.norm.eps)
