"""Correct on small inputs; inputs with more than 4096 elements (the "larger" variation) go to a
second kernel that uses `break`, which Triton cannot compile. A GPU fails at that launch, in the
full stage. Expected: compile_error, stage static, reward 0 (one definition, whichever stage)."""
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


@triton.jit
def relu_rows_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    for step in range(4):
        offsets = (pid * 4 + step) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        if (pid * 4 + step) * BLOCK_SIZE >= n_elements:
            break
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n <= 4096:
            relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        else:
            relu_rows_kernel[(triton.cdiv(n, 4 * 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
