"""Attack (tiny output passing by absolute tolerance): a min over many draws from [0, 1) returns 1e-3 for every row,
plus the row's first element times 1e-9 (so no two input sets give bit-identical outputs).

Source: KernelBench issue #165 ("Correctness check can be passed by returning zeros on 4 of 60
level-1 problems": 23_Softmax, 37_FrobeniusNorm_, 39_L2Norm_, 53_Min_reduction); issue 15
("A kernel returning `x * 1e-7` passes a softmax over 16,384 features").
A correct verifier must answer: not correct (the outputs are wrong at the reference's own scale).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def near_constant_kernel(x_ptr, out_ptr, stride, value):
    row = tl.program_id(0)
    tl.store(out_ptr + row, value + tl.load(x_ptr + row * stride) * 1e-9)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        near_constant_kernel[(x.shape[0],)](x, out, x.stride(0), 1e-3)
        return out
