import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(x_ptr, bias_ptr, out_ptr, n_elements, hw, channels, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    c = (offs // hw) % channels
    b = tl.load(bias_ptr + c, mask=mask)
    y = tl.maximum(x, 0.0) + b
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    """Conv2d stays in PyTorch (policy `fusion`); ReLU and the bias add are one Triton kernel."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x).contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        hw = x.shape[2] * x.shape[3]
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        relu_bias_kernel[grid](x, self.bias, out, n, hw, x.shape[1], BLOCK_SIZE=BLOCK_SIZE)
        return out
