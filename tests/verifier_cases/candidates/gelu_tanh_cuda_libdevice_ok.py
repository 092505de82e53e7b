"""Honest: the same GELU through the CUDA backend's libdevice module, with libdevice's tanh, pow and isnan (what a GPU links from NVIDIA's
libdevice; on the CPU the verifier fills them in for the interpreter)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * libdevice.pow(x, 3.0))
    y = 0.5 * x * (1.0 + libdevice.tanh(inner))
    y = tl.where(libdevice.isnan(x), x, y)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
