import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_silu_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    # One program per row: the mean square, then scale, gain and SiLU in the writing pass.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * inv_rms * w
        tl.store(out_row + start + cols, y / (1.0 + tl.exp(-y)), mask=mask)


def rms_norm_silu(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    n_cols = weight.numel()
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows = x.numel() // n_cols
    block_size = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = 4 if block_size <= 1024 else 8
    rms_norm_silu_kernel[(n_rows,)](x, weight, out, n_cols, eps, BLOCK_SIZE=block_size, num_warps=num_warps)
    return out


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super(ModelNew, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_silu(x, self.weight, self.eps)
