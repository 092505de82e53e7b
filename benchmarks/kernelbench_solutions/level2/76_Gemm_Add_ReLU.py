import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    # Epilogue over the (rows, out_features) GEMM output: relu(y + bias[col]), in float32, rounded
    # once to the output's dtype. int64 offsets: any size is handled.
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    z = y + b
    out = tl.where(z < 0, 0.0, z)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the GEMM stays in PyTorch (fusion policy, GEMM family); the bias add and ReLU are one kernel
        y = self.gemm(x).contiguous()
        out = torch.empty_like(y)
        n_elements = y.numel()
        if n_elements == 0:
            return out
        n_cols = y.shape[-1]
        assert self.bias.numel() == n_cols, "the bias is one value per output feature"
        block = 2048
        bias_relu_kernel[(triton.cdiv(n_elements, block),)](y, self.bias.contiguous(), out, n_elements, n_cols,
                                                            BLOCK_SIZE=block, num_warps=8)
        return out
