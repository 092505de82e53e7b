"""Honest: keeps a transposed copy of the weight, made when the weights are loaded (bookkeeping: a
transpose and a copy), the GEMM in PyTorch, divide, sum and scale in one Triton kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def div_sum_scale_kernel(y_ptr, out_ptr, N, scale, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    y = tl.load(y_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(y / 2.0, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor
        self.register_load_state_dict_post_hook(lambda module, keys: module._transpose())
        self._transpose()

    def _transpose(self):
        self.weight_t = self.weight.detach().t().contiguous()

    def forward(self, x):
        y = torch.mm(x, self.weight_t.to(x.device)).contiguous()
        M, N = y.shape
        out = torch.empty((M, 1), device=x.device, dtype=x.dtype)
        div_sum_scale_kernel[(M,)](y, out, N, self.scaling_factor, BLOCK_N=triton.next_power_of_2(N))
        return out
