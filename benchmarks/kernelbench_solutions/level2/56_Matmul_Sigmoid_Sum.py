import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sigmoid_row_sum_kernel(y_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # One program per row of the (rows, hidden) GEMM output: sum over the row of
    # sigmoid(y) = 1 / (1 + exp(-y)), in a float32 vector reduced once; one value per row.
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        y = tl.load(y_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += tl.where(mask, 1.0 / (1.0 + tl.exp(-y)), 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the GEMM (with its bias) stays in PyTorch (fusion policy, GEMM family); sigmoid and the
        # row sum are one kernel
        y = self.linear(x).contiguous()
        n_cols = y.shape[-1]
        n_rows = y.numel() // max(n_cols, 1)
        out = torch.empty((*y.shape[:-1], 1), dtype=y.dtype, device=y.device)
        if out.numel() == 0:
            return out
        block = min(triton.next_power_of_2(n_cols), 4096)
        sigmoid_row_sum_kernel[(n_rows,)](y, out, n_cols, BLOCK=block, num_warps=8)
        return out
