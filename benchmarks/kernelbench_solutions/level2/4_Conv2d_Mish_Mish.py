import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mish(x):
    # mish(x) = x * tanh(softplus(x)). With t = e^x, tanh(log(1 + t)) = t (t + 2) / (t (t + 2) + 2):
    # no cancellation for negative x (where mish is tiny) and no overflow for large x (t is capped
    # at e^20, where the ratio is 1 in float32, as PyTorch's softplus switches to x there).
    t = tl.exp(tl.minimum(x, 20.0))
    n = t * (t + 2.0)
    return x * (n / (n + 2.0))


@triton.jit
def mish_mish_kernel(y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the convolution output: mish(mish(y)) in float32, rounded once to the output's
    # dtype. int64 offsets: the published output has 5.3e8 elements.
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = _mish(_mish(y))
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the convolution stays in PyTorch (fusion policy); both Mish activations are one kernel
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        block = 2048
        mish_mish_kernel[(triton.cdiv(n_elements, block),)](y, out, n_elements, BLOCK_SIZE=block, num_warps=8)
        return out
