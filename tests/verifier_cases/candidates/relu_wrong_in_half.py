# Right in float32, wrong in half precision: only the last input set of the full stage (the dtype
# variation, GPU only) catches it, and on a GPU that set is judged while the candidate is timed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, SCALE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0) * SCALE, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale = 1.5 if x.dtype in (torch.float16, torch.bfloat16) else 1.0
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, SCALE=scale, BLOCK_SIZE=1024)
        return out
