import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_bias_relu_kernel(y_ptr, conv_bias_ptr, bias_ptr, n_elements, hw, channels, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the NCHW convolution output, in place: add the convolution's own bias and the
    # extra per-channel bias, then ReLU. The channel of a flat index is (index // (H*W)) % C.
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    c = (offs // hw) % channels
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    cb = tl.load(conv_bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + c, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(y + cb + b, 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The convolution stays in PyTorch (fusion policy); its bias moves into the Triton epilogue.
        conv = self.conv
        y = F.conv2d(x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups).contiguous()
        n_elements = y.numel()
        hw = y.shape[2] * y.shape[3]
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        bias_bias_relu_kernel[grid](y, conv.bias, self.bias, n_elements, hw, y.shape[1], BLOCK_SIZE=1024)
        return y
