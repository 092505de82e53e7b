import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_relu_kernel(x_ptr, out_ptr, n_elements, negative_slope, BLOCK_SIZE: tl.constexpr):
    # One contiguous block per program, int64 offsets (the published input has 1.6e9 elements;
    # its larger variation passes 2**31). The product is taken in float32 and rounded once to
    # the input's dtype, as PyTorch's half kernels do.
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    out = tl.where(x > 0, x, x * negative_slope)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def leaky_relu(x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    block = 4096
    leaky_relu_kernel[(triton.cdiv(n_elements, block),)](x, out, n_elements, float(negative_slope),
                                                         BLOCK_SIZE=block, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu(x, self.negative_slope)
