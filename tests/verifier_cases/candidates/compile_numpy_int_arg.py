"""The element count is passed to the kernel as a numpy integer. The interpreter takes it; a GPU's
launcher cannot specialise a numpy.int64 argument and refuses the launch. Expected: compile_error."""
import numpy as np
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
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = np.prod(x.shape)
        relu_kernel[(triton.cdiv(int(n), 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
