import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def logsigmoid_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)): no overflow for either sign
    y = tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, hidden_states):
        x = hidden_states.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        logsigmoid_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
        return out
