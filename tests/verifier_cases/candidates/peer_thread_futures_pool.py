"""Attack (PyTorch work in another thread): a module-level ThreadPoolExecutor, taken from
`sys.modules` reached as `logging.sys`, computes the ReLU with PyTorch; forward launches a Triton
kernel into scratch so a launch is seen.

Source: KernelBench's static checker (THREAD_PATTERNS: concurrent.futures, ThreadPoolExecutor);
issue 15 ("PyTorch work in another thread is never counted").
A correct verifier must answer: not correct (threads of its own; PyTorch compute).
"""

import logging

import torch
import torch.nn as nn
import triton
import triton.language as tl

futures = logging.sys.modules["concurrent.futures"]
POOL = futures.ThreadPoolExecutor(max_workers=1)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        scratch = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, scratch, x.numel(), BLOCK=1024)
        return POOL.submit(lambda t: t * (t > 0), x).result()
