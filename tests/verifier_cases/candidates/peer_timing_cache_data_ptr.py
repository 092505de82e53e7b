"""Attack (result reuse across calls, keyed by the input's address): forward memoises its output by
(data_ptr, shape). A timer that calls it again and again on the same input tensor gets the memo
after the first call; a verifier whose input sets land at the same address gets a stale result.

Source: issue 15 ("result reuse across calls (cache keyed by data_ptr or shape)"); KernelBench's
adversarial tests (result reuse); KernelGenBench's scan (".data_ptr()", "module-level _cache").
A correct verifier must answer: not correct (outputs of repeated calls on new data are stale).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


def relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out

MEMO = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in MEMO:
            MEMO[key] = relu(x)
        return MEMO[key]
