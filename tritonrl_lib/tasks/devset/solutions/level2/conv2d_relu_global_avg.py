import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_mean_plane_kernel(y_ptr, out_ptr, HW, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(y_ptr + plane * HW + offs, mask=offs < HW, other=0.0).to(tl.float32)
        acc += tl.maximum(v, 0.0)
    tl.store(out_ptr + plane, tl.sum(acc, axis=0) / HW)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C), device=y.device, dtype=y.dtype)
        BLOCK = min(1024, triton.next_power_of_2(H * W))
        relu_mean_plane_kernel[(N * C,)](y, out, H * W, BLOCK=BLOCK)
        return out
