"""A head start (issue 31: paid an 8.5x speedup for a kernel slower than the reference): the kernel on a
side stream that never waits for the caller's, so once queued it runs while the timer's flush and spin still
occupy the caller's stream, before the start event; the caller's stream waits for it at the end, so the
values a consumer reads are right. Unordered at the start: `cheat:unordered_stream`."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        torch.cuda.current_stream().wait_stream(self.side)
        return out
