"""Work not ordered with the caller's stream (KernelBench's adversarial `non_default_stream_kernel`): the ReLU
kernel launched on a stream of its own that waits for nothing and is waited for by nothing. A consumer on the
caller's stream may read the output before the kernel ran; while timing, the kernel may run during the
timer's flush, before its start event. Values come out right here (the verifier synchronises the device),
so only the stream-order check sees it: `cheat:unordered_stream`."""

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
        return out
