import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def gemm_scale_leaky_relu_clamp_epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, scale,
                                                negative_slope, min_val, max_val, BLOCK_SIZE: tl.constexpr):
    # One block of the GEMM output per program, 64-bit offsets; the feature of flat index i is
    # i % n_cols. The whole chain in float32: bias, scale, LeakyReLU, clamp.
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    feat = offs % n_cols
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y += tl.load(bias_ptr + feat, mask=mask, other=0.0).to(tl.float32)
    y = y * scale
    y = tl.where(y > 0, y, y * negative_slope)
    y = tl.minimum(tl.maximum(y, min_val), max_val)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gemm_epilogue(y: torch.Tensor, bias: torch.Tensor, scale: float, negative_slope: float, min_val: float,
                  max_val: float) -> torch.Tensor:
    y = y.contiguous()
    out = torch.empty_like(y)
    n_elements = y.numel()
    if n_elements == 0:
        return out
    block_size = 1024
    grid = (triton.cdiv(n_elements, block_size),)
    gemm_scale_leaky_relu_clamp_epilogue_kernel[grid](y, bias.contiguous(), out, n_elements, y.shape[-1], scale,
                                                      negative_slope, min_val, max_val, BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float, negative_slope: float,
                 min_val: float, max_val: float):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.negative_slope = negative_slope
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The GEMM stays in PyTorch (fusion policy) without its bias; the bias and the whole chain
        # after it run in one Triton pass over the GEMM output.
        y = F.linear(x, self.linear.weight)
        return gemm_epilogue(y, self.linear.bias, self.scale, self.negative_slope, self.min_val, self.max_val)
