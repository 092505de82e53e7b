import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def residual_relu_scale_kernel(x_ptr, r_ptr, out_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, tl.maximum(x + r, 0.0) * scale, mask=mask)


def residual_relu_scale(x: torch.Tensor, residual: torch.Tensor, scale: float) -> torch.Tensor:
    assert x.shape == residual.shape, "expects x and residual of the same shape"
    x, residual = x.contiguous(), residual.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    residual_relu_scale_kernel[grid](x, residual, out, n_elements, scale, BLOCK_SIZE=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super(ModelNew, self).__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return residual_relu_scale(x, residual, self.scale)
