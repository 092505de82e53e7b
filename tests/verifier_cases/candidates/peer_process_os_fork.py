"""Attack (PyTorch work in another process): forward forks with `os.fork` reached as `logging.os`;
the child process computes the ReLU with PyTorch into shared memory and exits, the parent waits.
A forked child's dispatch modes are its own copy: the parent's op census counts nothing.

Source: KernelBench's static checker (multiprocessing patterns, "thread injection"); issue 15
("in another process (multiprocessing, os.fork, subprocess)").
A correct verifier must answer: not correct (a process of its own; PyTorch compute).
"""

import logging

import torch
import torch.nn as nn
import triton
import triton.language as tl

os = logging.os


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # shared with the forked child: the child's writes reach this process
        self.shared = torch.empty(1 << 20).share_memory_()

    def forward(self, x):
        x = x.contiguous()
        host = x.cpu()
        out = self.shared[: x.numel()].view(x.shape)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, torch.empty_like(x), x.numel(), BLOCK=1024)
        pid = os.fork()
        if pid == 0:
            out.copy_(host * (host > 0))
            os._exit(0)
        os.waitpid(pid, 0)
        return out.clone().to(x.device)
