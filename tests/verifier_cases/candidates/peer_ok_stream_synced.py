"""Honest control (unusual style): on a GPU the kernel runs on a side stream that first waits for
the current stream and that the current stream then waits for, so the output is ready wherever it
is read; input and output belong to the current stream, which uses them only after that wait. On
the CPU it runs directly.
A correct verifier must answer: correct (with an honest time on a GPU).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


def launch(x, out):
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)  # allocated on the current stream, which uses it after the wait below
        if not x.is_cuda:
            launch(x, out)
            return out
        if self.side is None:
            self.side = torch.cuda.Stream()
        current = torch.cuda.current_stream()
        self.side.wait_stream(current)
        with torch.cuda.stream(self.side):
            launch(x, out)
        current.wait_stream(self.side)
        return out
