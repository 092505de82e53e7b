"""Honest: the kernel launched through Triton's own launch API, `kernel.run(*args, grid=..., warmup=False)`
(what `kernel[grid](*args)` calls), as a solution may write it. It must count as a launch: statically (not
`static:kernel_unreachable`) and at run time (not `cheat:no_triton_launch`)."""

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
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = relu_kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n > 4096:
            relu_kernel.run(x, out, n, BLOCK_SIZE=1024, grid=(triton.cdiv(n, 1024),), warmup=False)
        else:
            self.kernel.run(x, out, n, BLOCK_SIZE=256, grid=(triton.cdiv(n, 256),), warmup=False)
        return out
