"""`x ** 2` on a Triton tensor: no such operator. The interpreter fails inside the kernel with a
TypeError of its own (not a triton.language rule), the compiler rejects the construct. Expected:
compile_error (as on a GPU), not runtime_error."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    relu = tl.where(x > 0, x, 0.0)
    tl.store(out_ptr + offsets, (relu ** 2) / tl.where(x > 0, x, 1.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
