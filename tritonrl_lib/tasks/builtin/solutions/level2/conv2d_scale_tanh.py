import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def conv2d_scale_tanh_epilogue_kernel(y_ptr, conv_bias_ptr, n_elements, spatial, channels, scale,
                                      BLOCK_SIZE: tl.constexpr):
    # In place over the NCHW convolution output; the channel of flat index i is (i // (H*W)) % C.
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    c = (offs // spatial) % channels
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y += tl.load(conv_bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    y = y * scale
    e = tl.exp(-2.0 * tl.abs(y))  # tanh without overflow
    t = (1.0 - e) / (1.0 + e)
    y = tl.where(y < 0, -t, t)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy) without its bias; bias and the rest of
        # the chain run in one Triton pass over the convolution output, in place.
        conv = self.conv
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        n_elements = y.numel()
        spatial = n_elements // (y.shape[0] * y.shape[1])
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        conv2d_scale_tanh_epilogue_kernel[grid](y, conv.bias, n_elements, spatial, y.shape[1], self.scale,
                                                       BLOCK_SIZE=1024)
        return y
