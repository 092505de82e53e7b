"""Attack (value-range specialisation, magnitude): a softmax without the max subtraction. On the
task's randn inputs (and twice them) exp never overflows, so it passes; on inputs of magnitude
~100, where the reference is finite, exp overflows and the result is NaN.

Source: issue 15 ("input sets exercise the operation's whole accepted input range (signs and
magnitudes where the reference stays finite)"); the numerically naive softmax is the textbook case.
A correct verifier must answer: not correct (NaN where the reference is finite).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def naive_softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    e = tl.exp(tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")))
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        naive_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0),
                                            BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
