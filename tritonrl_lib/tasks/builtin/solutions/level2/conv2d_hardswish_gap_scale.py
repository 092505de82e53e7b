import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def conv2d_hardswish_gap_scale_kernel(y_ptr, conv_bias_ptr, scale_ptr, out_ptr, channels, spatial,
                                      BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # A program owns BLOCK_C channels of one sample and walks their spatial extent in [BLOCK_C, BLOCK_S]
    # tiles (64-bit offsets): the convolution's bias and HardSwish in float32, summed per channel;
    # then the mean times the channel's scale, one value per (sample, channel).
    n = tl.program_id(0)
    ch = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ch_mask = ch < channels
    base = n.to(tl.int64) * channels * spatial
    conv_bias = tl.load(conv_bias_ptr + ch, mask=ch_mask, other=0.0).to(tl.float32)
    acc = tl.zeros((BLOCK_C, BLOCK_S), dtype=tl.float32)
    for start in range(0, spatial, BLOCK_S):
        cols = start + tl.arange(0, BLOCK_S)
        mask = ch_mask[:, None] & (cols < spatial)[None, :]
        y = tl.load(y_ptr + base + ch.to(tl.int64)[:, None] * spatial + cols[None, :], mask=mask, other=0.0)
        y = y.to(tl.float32) + conv_bias[:, None]
        y = y * tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0
        acc += tl.where(mask, y, 0.0)
    pooled = tl.sum(acc, axis=1) / spatial
    pooled = pooled * tl.load(scale_ptr + ch, mask=ch_mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + n.to(tl.int64) * channels + ch, pooled.to(out_ptr.dtype.element_ty), mask=ch_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.scale = nn.Parameter(torch.ones(out_channels) + 0.1 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy) without its bias; its bias, HardSwish, the
        # global average pooling and the scale are one Triton kernel.
        conv = self.conv
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        batch, channels = y.shape[0], y.shape[1]
        out = torch.empty((batch, channels), dtype=y.dtype, device=y.device)
        spatial = y.numel() // max(batch * channels, 1)
        if out.numel() == 0 or spatial == 0:
            return out
        block_c = min(triton.next_power_of_2(channels), 16)
        block_s = min(triton.next_power_of_2(spatial), 256)
        grid = (batch, triton.cdiv(channels, block_c))
        conv2d_hardswish_gap_scale_kernel[grid](y, conv.bias, self.scale.contiguous(), out, channels, spatial,
                                                BLOCK_C=block_c, BLOCK_S=block_s)
        return out
