import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_leaky_relu_kernel(y_ptr, out_ptr, n_elements, multiplier, negative_slope, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the GEMM output (bias already added by nn.Linear): leaky_relu(y * multiplier),
    # in float32, rounded once to the output's dtype. int64 offsets: any size is handled.
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32) * multiplier
    out = tl.where(y > 0, y, y * negative_slope)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the GEMM (with its bias) stays in PyTorch (fusion policy, GEMM family); the scale and
        # LeakyReLU are one kernel
        y = self.gemm(x).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        block = 2048
        scale_leaky_relu_kernel[(triton.cdiv(n_elements, block),)](y, out, n_elements, float(self.multiplier),
                                                                   float(self.negative_slope), BLOCK_SIZE=block,
                                                                   num_warps=8)
        return out
