import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def conv2d_sub_tanh_scale_residual_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, n_elements, spatial, channels,
                                          scaling_factor, BLOCK_SIZE: tl.constexpr):
    # One block of the NC... convolution output per program, 64-bit offsets; the channel of flat
    # index i is (i // spatial) % channels. The whole chain in float32: the convolution's bias, then
    # tanh(y - bias) * scaling_factor + y (the residual is the biased convolution output).
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    c = (offs // spatial) % channels
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y += tl.load(conv_bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    t = y - tl.load(bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    e = tl.exp(-2.0 * tl.abs(t))  # tanh without overflow
    th = (1.0 - e) / (1.0 + e)
    th = tl.where(t < 0, -th, th)
    out = th * scaling_factor + y
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scaling_factor: float):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy) without its bias; its bias and the whole
        # chain after it run in one Triton pass over the convolution output.
        conv = self.conv
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        channels = y.shape[1]
        spatial = n_elements // (y.shape[0] * channels)
        block_size = 1024
        grid = (triton.cdiv(n_elements, block_size),)
        conv2d_sub_tanh_scale_residual_kernel[grid](y, conv.bias, self.bias.contiguous(), out, n_elements, spatial,
                                                    channels, self.scaling_factor, BLOCK_SIZE=block_size)
        return out
