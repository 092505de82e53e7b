import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_tanh_kernel(x_ptr, bias_ptr, out_ptr, n_elements, hidden, scale, BLOCK_SIZE: tl.constexpr):
    # Flat blocks over a contiguous (..., hidden) tensor; the bias of flat index i is bias[i % hidden].
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + offs % hidden, mask=mask, other=0.0).to(tl.float32)
    v = x * scale + b
    e = tl.exp(-2.0 * tl.abs(v))  # tanh without overflow
    t = (1.0 - e) / (1.0 + e)
    tl.store(out_ptr + offs, tl.where(v < 0, -t, t), mask=mask)


def scale_bias_tanh(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    assert x.shape[-1] == bias.numel(), "the bias must match the last dimension"
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    scale_bias_tanh_kernel[grid](x, bias, out, n_elements, bias.numel(), scale, BLOCK_SIZE=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self, hidden: int, scale: float):
        super(ModelNew, self).__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(hidden) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale_bias_tanh(x, self.bias, self.scale)
