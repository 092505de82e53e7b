# A max-reduction whose accumulator starts at 0, not -inf: right on inputs of one sign (rand), wrong on any
# all-negative row (the seed set negates its inputs).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def max_kernel(x_ptr, out_ptr, R, C, stride_b, stride_r, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)  # one (batch, col) pair
    b = pid // C
    c = pid % C
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)  # BUG: should be -inf
    for r0 in range(0, R, BLOCK_R):
        rs = r0 + tl.arange(0, BLOCK_R)
        v = tl.load(x_ptr + b * stride_b + rs * stride_r + c, mask=rs < R, other=float("-inf"))
        acc = tl.maximum(acc, v.to(tl.float32))
    tl.store(out_ptr + pid, tl.max(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        B, R, C = x.shape
        out = torch.empty((B, C), dtype=x.dtype, device=x.device)
        max_kernel[(B * C,)](x, out, R, C, x.stride(0), x.stride(1), BLOCK_R=128)
        return out
