"""Honest: compares in float32 whatever the input dtype; on float16 inputs it equals the float32 model
run on the same half inputs (the second valid reference), not the half model."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gt_kernel(x_ptr, out_ptr, threshold, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, x > threshold, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        n = x.numel()
        gt_kernel[(triton.cdiv(n, 4096),)](x, out, self.threshold, n, BLOCK=4096)
        return out
