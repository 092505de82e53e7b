import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def conv2d_bias_scale_logsumexp_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, reduce_len, inner, scale,
                                       BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # The convolution output read as (rows, reduce_len, inner): a program owns BLOCK_I inner (spatial)
    # positions of one row and walks the channels in [BLOCK_R, BLOCK_I] tiles, applying the
    # chain (the convolution's bias, the bias parameter, scale) to each tile in float32 and keeping
    # an online logsumexp per position (running maximum, sum of exponentials rescaled to it).
    cols = tl.program_id(0).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    row = tl.program_id(1).to(tl.int64)
    col_mask = cols < inner
    base = row * reduce_len * inner
    run_max = tl.full((BLOCK_I,), float("-inf"), dtype=tl.float32)
    run_sum = tl.zeros((BLOCK_I,), dtype=tl.float32)
    for start in range(0, reduce_len, BLOCK_R):
        ch = start + tl.arange(0, BLOCK_R)
        ch_mask = ch < reduce_len
        mask = ch_mask[:, None] & col_mask[None, :]
        ptrs = y_ptr + base + ch.to(tl.int64)[:, None] * inner + cols[None, :]
        y = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(conv_bias_ptr + ch, mask=ch_mask, other=0.0).to(tl.float32)[:, None]
        y += tl.load(bias_ptr + ch, mask=ch_mask, other=0.0).to(tl.float32)[:, None]
        y = y * scale
        # channels past the end count for nothing; positions past the end stay finite (masked at the store)
        y = tl.where(ch_mask[:, None], y, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(y, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(y - new_max[None, :]), axis=0)
        run_max = new_max
    total = run_max + tl.log(run_sum)
    tl.store(out_ptr + row * inner + cols, total.to(out_ptr.dtype.element_ty), mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy) without its bias; its bias, the chain and
        # the logsumexp over the channels are one Triton kernel.
        conv = self.conv
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        rows, reduce_len = y.shape[0], y.shape[1]
        out = torch.empty((rows, 1, *y.shape[2:]), dtype=y.dtype, device=y.device)
        inner = out.numel() // rows if rows else 0
        if out.numel() == 0:
            return out
        block_r = min(triton.next_power_of_2(reduce_len), 16)
        block_i = min(triton.next_power_of_2(inner), 128)
        grid = (triton.cdiv(inner, block_i), rows)  # positions on axis 0, which has no 65535 limit
        conv2d_bias_scale_logsumexp_kernel[grid](y, conv.bias, self.bias.contiguous(), out, reduce_len, inner,
                                                 self.scale, BLOCK_R=block_r, BLOCK_I=block_i)
        return out
