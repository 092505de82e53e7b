import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_mean_rows_kernel(y_ptr, out_ptr, row_len, BLOCK: tl.constexpr):
    # One program per (batch, channel) row of the NCHW convolution output (H*W contiguous
    # values): the mean over the row of exact GELU, 0.5 * y * (1 + erf(y / sqrt(2))), summed in a
    # float32 vector and reduced once. The result is one value per row: (N, C).
    row = tl.program_id(0).to(tl.int64)
    base = row * row_len
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, row_len, BLOCK):
        mask = start + offs < row_len
        y = tl.load(y_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))  # GELU(0) = 0: masked lanes add nothing
    mean = tl.sum(acc, axis=0) / row_len
    tl.store(out_ptr + row, mean.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the convolution stays in PyTorch (fusion policy); GELU and the global average pool
        # (a row reduction) are one kernel
        y = self.conv(x).contiguous()
        batch, channels = y.shape[0], y.shape[1]
        out = torch.empty((batch, channels), dtype=y.dtype, device=y.device)
        if out.numel() == 0:
            return out
        row_len = y.numel() // (batch * channels)
        block = max(16, min(triton.next_power_of_2(row_len), 4096))
        gelu_mean_rows_kernel[(batch * channels,)](y, out, row_len, BLOCK=block, num_warps=8)
        return out
