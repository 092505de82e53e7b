import importlib
import os
import sys
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


def relu(x, out=None):
    x = x.contiguous()
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
    return out


_LIB = """
import triton
import triton.language as tl


@triton.jit
def library_relu(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)
"""
with open("some_library.py", "w") as _f:
    _f.write(_LIB)
sys.path.insert(0, os.getcwd())
_lib = importlib.import_module("some_library")


class ModelNew(nn.Module):
    """Launches a kernel defined in another module, not its own."""

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        _lib.library_relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
