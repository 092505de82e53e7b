"""Correct. The module computes with PyTorch and draws random numbers when imported. The compile
check imports the module a second time (without the interpreter) at the first launch, inside
forward: that import's tensor ops must not count as forward's PyTorch compute, nor shift the
random state."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_NOISE = torch.randn(8) * 0.0  # computed at import: not the candidate's forward
_THRESHOLD = float(_NOISE.sum())


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, threshold, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > threshold, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, _THRESHOLD, BLOCK_SIZE=1024)
        return out
