import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_residual_kernel(y_ptr, x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + offs, x + g, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        x = x.contiguous()
        y = self.conv(x).contiguous()  # convolution (with its bias) stays in PyTorch
        out = torch.empty_like(y)
        n = y.numel()
        BLOCK = 1024
        gelu_residual_kernel[(triton.cdiv(n, BLOCK),)](y, x, out, n, BLOCK=BLOCK)
        return out
