import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(y_ptr, bias_ptr, out_ptr, n_elements, hw, channels, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the NCHW convolution output: relu(y) + bias[c], where the channel of a flat
    # index is (index // (H*W)) % C; computed in float32, rounded once to the output's dtype.
    # int64 offsets: the published output has 2.6e8 elements, any size is handled.
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    c = (offs // hw) % channels
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    out = tl.where(y < 0, 0.0, y) + b
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the convolution stays in PyTorch (fusion policy); ReLU and the bias add are one kernel
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        channels = y.shape[1]
        hw = n_elements // (y.shape[0] * channels)
        assert self.bias.numel() == channels, "the bias is one value per output channel, (C, 1, 1)"
        block = 2048
        relu_bias_kernel[(triton.cdiv(n_elements, block),)](y, self.bias.contiguous(), out, n_elements, hw,
                                                            channels, BLOCK_SIZE=block, num_warps=8)
        return out
