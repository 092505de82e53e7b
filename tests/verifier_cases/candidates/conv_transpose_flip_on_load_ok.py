"""Honest: a stride-1 transposed convolution as a convolution with the kernel flipped and transposed when
the weights are loaded (layout), the ReLU in Triton."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv_t = nn.ConvTranspose2d(cin, cout, k)
        self.k = k
        self._relayout()
        self.register_load_state_dict_post_hook(lambda module, keys: module._relayout())

    def _relayout(self):
        with torch.no_grad():
            self.w_conv = self.conv_t.weight.transpose(0, 1).flip(-1, -2).contiguous()

    def forward(self, x):
        y = F.conv2d(x, self.w_conv.to(x.device, x.dtype), self.conv_t.bias.to(x.dtype), padding=self.k - 1)
        y = y.contiguous()
        out = torch.empty_like(y)
        relu_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
