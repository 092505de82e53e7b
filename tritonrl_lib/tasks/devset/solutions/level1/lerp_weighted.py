import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lerp_kernel(start_ptr, end_ptr, w_ptr, out_ptr, n_elements, dim, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    s = tl.load(start_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    e = tl.load(end_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs % dim, mask=mask, other=0.0).to(tl.float32)
    y = s + w * (e - s)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, start, end, weight):
        start = start.contiguous()
        end = end.contiguous()
        weight = weight.contiguous()
        out = torch.empty_like(start)
        n = start.numel()
        BLOCK = 1024
        lerp_kernel[(triton.cdiv(n, BLOCK),)](start, end, weight, out, n, weight.numel(), BLOCK=BLOCK)
        return out
