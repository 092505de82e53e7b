"""Work not ordered with the caller's stream, hidden behind a reused event id: an event recorded on the
caller's stream is dropped and a new one made (CPython often gives it the dropped one's id); the side
stream waits on the new event, which was never recorded, so CUDA waits for nothing. A bookkeeping that
knew events by `id()` handed the new event the old one's record and saw the side stream ordered. The
kernel still races the caller's inputs: `cheat:unordered_stream`."""

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
        recorded = torch.cuda.Event()
        recorded.record()  # on the caller's stream
        del recorded
        fresh = torch.cuda.Event()  # often the dropped event's id
        fresh.wait(self.side)  # never recorded: waits for nothing
        with torch.cuda.stream(self.side):
            relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        done = torch.cuda.Event()
        done.record(self.side)
        done.wait()  # the caller waits for the kernel before returning
        return out
