import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, hw, channels, BLOCK_SIZE: tl.constexpr):
    # x is (N, C, H, W) contiguous; element i belongs to channel (i // (H*W)) % C.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(bias_ptr + (offsets // hw) % channels, mask=mask)
    y = x + b
    tl.store(out_ptr + offsets, tl.where(y > 0, y, 0.0), mask=mask)


class ModelNew(nn.Module):
    """The convolution stays in PyTorch (allowed by the fusion policy); bias + ReLU is one kernel."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x).contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        bias_relu_kernel[grid](x, self.bias, out, n, x.shape[2] * x.shape[3], x.shape[1], BLOCK_SIZE=1024)
        return out
