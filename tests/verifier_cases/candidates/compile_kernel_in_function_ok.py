"""Correct. The kernel is created inside a function at run time, so the compile check cannot reach
it from the module (it notes that and leaves the launch to the interpreter): it must not fail."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def make_relu_kernel():
    @triton.jit
    def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)

    return relu_kernel


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = make_relu_kernel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        self.kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
