import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # One contiguous block per program. The block's start is computed in int64: the published
    # input has 1.6e9 elements and its larger variation passes 2**31.
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # `x < 0` (not `x > 0`) keeps NaN as NaN, as torch.relu does; no arithmetic, so any float dtype
    # is exact in its own precision
    out = tl.where(x < 0, tl.zeros_like(x), x)
    tl.store(out_ptr + offsets, out, mask=mask)


def relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    block = 4096
    relu_kernel[(triton.cdiv(n_elements, block),)](x, out, n_elements, BLOCK_SIZE=block, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu(x)
