import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_rms_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    # Each program reduces BLOCK_ROWS rows at once, BLOCK_COLS columns per step: square, sum,
    # then sqrt(sum / n_cols) per row.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    cols = tl.arange(0, BLOCK_COLS)
    acc = tl.zeros([BLOCK_ROWS, BLOCK_COLS], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_COLS):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * n_cols + c[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(out_ptr + rows, tl.sqrt(tl.sum(acc, axis=1) / n_cols), mask=row_mask)


def row_rms(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    block_rows = 4
    block_cols = min(triton.next_power_of_2(n_cols), 1024)
    row_rms_kernel[(triton.cdiv(n_rows, block_rows),)](x, out, n_rows, n_cols, BLOCK_ROWS=block_rows,
                                                      BLOCK_COLS=block_cols)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_rms(x)
