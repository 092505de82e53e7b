import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_div_bias_gelu_epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, divisor,
                                         BLOCK_SIZE: tl.constexpr):
    # One block of the matmul output per program, 64-bit offsets; the feature of flat index i is
    # i % n_cols (any number of leading dims). The whole chain in float32: divide, bias, exact GELU.
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    feat = offs % n_cols
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y / divisor
    y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def matmul_epilogue(y: torch.Tensor, bias: torch.Tensor, divisor: float) -> torch.Tensor:
    y = y.contiguous()
    out = torch.empty_like(y)
    n_elements = y.numel()
    if n_elements == 0:
        return out
    block_size = 1024
    grid = (triton.cdiv(n_elements, block_size),)
    matmul_div_bias_gelu_epilogue_kernel[grid](y, bias.contiguous(), out, n_elements, y.shape[-1], divisor,
                                               BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, divisor: float):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.02)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The matmul stays in PyTorch (fusion policy); the whole chain after it is one Triton pass.
        y = torch.matmul(x, self.weight)
        return matmul_epilogue(y, self.bias, self.divisor)
