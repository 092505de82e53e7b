import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_norm_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, group_size, hw, num_groups, channels_per_group, eps,
                           BLOCK_SIZE: tl.constexpr):
    # One program per (sample, group): in NCHW a group is one contiguous run of
    # channels_per_group * H * W values. Mean, variance, then normalise + affine + ReLU.
    pid = tl.program_id(0).to(tl.int64)
    group = tl.program_id(0) % num_groups
    x_group = x_ptr + pid * group_size
    out_group = out_ptr + pid * group_size
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, group_size, BLOCK_SIZE):
        acc += tl.load(x_group + start + offs, mask=start + offs < group_size, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / group_size
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, group_size, BLOCK_SIZE):
        mask = start + offs < group_size
        x = tl.load(x_group + start + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / group_size + eps)
    for start in range(0, group_size, BLOCK_SIZE):
        j = start + offs
        mask = j < group_size
        c = group * channels_per_group + j // hw
        x = tl.load(x_group + j, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_group + j, tl.maximum(y, 0.0), mask=mask)


def group_norm_relu(x: torch.Tensor, gn: nn.GroupNorm) -> torch.Tensor:
    x = x.contiguous()
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // (n * c)
    groups = gn.num_groups
    out = torch.empty_like(x)
    group_size = (c // groups) * hw
    block_size = min(triton.next_power_of_2(group_size), 2048)
    group_norm_relu_kernel[(n * groups,)](x, gn.weight, gn.bias, out, group_size, hw, groups, c // groups, gn.eps,
                                          BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, num_channels: int):
        super(ModelNew, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return group_norm_relu(x, self.gn)
