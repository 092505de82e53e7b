import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_scale_kernel(x_ptr, out_ptr, n_cols, scale, eps, BLOCK_SIZE: tl.constexpr):
    # One program per row: sum of squares, then one writing pass with scale / max(norm, eps).
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    factor = scale / tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + start + cols, x * factor, mask=mask)


def l2_normalize_scale(x: torch.Tensor, scale: float, eps: float = 1e-12) -> torch.Tensor:
    assert x.dim() == 2, "expects a 2D tensor (rows, cols)"
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block_size = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = 4 if block_size <= 1024 else 8
    l2_normalize_scale_kernel[(n_rows,)](x, out, n_cols, scale, eps, BLOCK_SIZE=block_size, num_warps=num_warps)
    return out


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super(ModelNew, self).__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2_normalize_scale(x, self.scale)
