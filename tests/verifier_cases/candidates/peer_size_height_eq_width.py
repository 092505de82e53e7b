"""Attack (size constants the verifier cannot vary): the task writes its spatial sizes
`height = width = 16`; this softmax hard-codes the row length 16 (no mask, a fixed block) and is
right only at that width. The batch is read from the input, so a varied batch alone never tells.

Source: issue 15 ("Size constants written `height = width = 16` (as 15 of KernelBench's 100 L2
problems write them) are not recognised, so those sizes are never varied and a kernel hard-coding
them passes"); KernelBench's level 2 problems (`height = width = 128`).
A correct verifier must answer: not correct (wrong at another width).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

WIDTH = 16


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, W: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, W)
    x = tl.load(x_ptr + row * W + cols)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * W + cols, e / tl.sum(e, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_rows_kernel[(x.numel() // WIDTH,)](x, out, W=WIDTH)
        return out
