import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def divide_leaky_relu_kernel(y_ptr, out_ptr, n_elements, divisor, negative_slope, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the convolution output: leaky_relu(y / divisor), in float32, rounded once to
    # the output's dtype. int64 offsets: any size is handled.
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32) / divisor
    out = tl.where(y > 0, y, y * negative_slope)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the convolution stays in PyTorch (fusion policy); the division and LeakyReLU are one kernel
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        block = 2048
        divide_leaky_relu_kernel[(triton.cdiv(n_elements, block),)](y, out, n_elements, float(self.divisor), 0.01,
                                                                    BLOCK_SIZE=block, num_warps=8)
        return out
