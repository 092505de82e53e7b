import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def instance_norm_kernel(x_ptr, out_ptr, plane_size, eps, BLOCK_SIZE: tl.constexpr):
    # One program per (sample, channel) plane, contiguous in NCHW: mean, variance, normalize.
    plane = tl.program_id(0).to(tl.int64)
    x_plane = x_ptr + plane * plane_size
    out_plane = out_ptr + plane * plane_size
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, plane_size, BLOCK_SIZE):
        acc += tl.load(x_plane + start + offs, mask=start + offs < plane_size, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / plane_size
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, plane_size, BLOCK_SIZE):
        mask = start + offs < plane_size
        x = tl.load(x_plane + start + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / plane_size + eps)
    for start in range(0, plane_size, BLOCK_SIZE):
        mask = start + offs < plane_size
        x = tl.load(x_plane + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_plane + start + offs, (x - mean) * rstd, mask=mask)


def instance_norm_2d(x: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    n, c, h, w = x.shape
    out = torch.empty_like(x)
    plane_size = h * w
    block_size = min(triton.next_power_of_2(plane_size), 2048)
    instance_norm_kernel[(n * c,)](x, out, plane_size, eps, BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super(ModelNew, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return instance_norm_2d(x, self.inorm.eps)
