import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def conv2d_groupnorm_leaky_relu_kernel(y_ptr, conv_bias_ptr, gn_weight_ptr, gn_bias_ptr, out_ptr, channels, spatial,
                                       num_groups, eps, negative_slope, BLOCK: tl.constexpr):
    # One program per (sample, group): in NCHW the group's channels are contiguous, group_len
    # elements from a 64-bit base. The convolution's bias is added at each element's channel
    # (g * per_group + offset // spatial); a pass for the mean, one for the variance (two-pass, so no
    # cancellation), one writing (y - mean) * rstd * weight + bias through LeakyReLU, in float32.
    pid = tl.program_id(0)
    g = pid % num_groups
    per_group = channels // num_groups
    group_len = per_group * spatial
    base = pid.to(tl.int64) * group_len
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_len, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < group_len
        ch = g * per_group + idx // spatial
        y = tl.load(y_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(conv_bias_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        acc += tl.where(mask, y, 0.0)
    mean = tl.sum(acc, axis=0) / group_len
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_len, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < group_len
        ch = g * per_group + idx // spatial
        y = tl.load(y_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(conv_bias_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, y - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / group_len + eps)
    for start in range(0, group_len, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < group_len
        ch = g * per_group + idx // spatial
        y = tl.load(y_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(conv_bias_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(gn_weight_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(gn_bias_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        y = (y - mean) * rstd * w + b
        y = tl.where(y > 0, y, y * negative_slope)
        tl.store(out_ptr + base + idx, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int,
                 negative_slope: float):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy) without its bias; its bias, the group norm
        # (with its affine parameters) and LeakyReLU are one Triton kernel.
        conv, gn = self.conv, self.group_norm
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        out = torch.empty_like(y)
        if out.numel() == 0:
            return out
        batch, channels = y.shape[0], y.shape[1]
        spatial = y.numel() // (batch * channels)
        group_len = channels // gn.num_groups * spatial
        block = min(triton.next_power_of_2(group_len), 1024)
        conv2d_groupnorm_leaky_relu_kernel[(batch * gn.num_groups,)](
            y, conv.bias, gn.weight, gn.bias, out, channels, spatial, gn.num_groups, gn.eps, self.negative_slope,
            BLOCK=block)
        return out
