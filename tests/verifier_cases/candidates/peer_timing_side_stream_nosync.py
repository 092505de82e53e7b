"""Attack (work on a non-default stream, never synchronised): on a GPU the kernel is launched on a
side stream and forward returns without waiting for it, so a timer that synchronises only the
current stream measures the launch, not the work. On the CPU the kernel runs as usual.

Source: KernelBench's adversarial tests (non_default_stream_kernel.py, test_non_default_stream:
"Eval script should accurately measure runtime by waiting on all streams"); DeepReinforce's
"stream injection".
A correct verifier must answer: on the CPU, correct (the output is right); on a GPU, no speedup it
did not earn (either rejected for the unsynchronised stream, or timed with the side stream's work).
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


def relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if not x.is_cuda:
            return relu(x)
        if self.side is None:
            self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            return relu(x)
