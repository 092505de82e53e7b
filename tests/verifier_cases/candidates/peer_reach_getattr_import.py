"""Attack (a forbidden module through `getattr(__import__(...))`): `os.fork` is looked up by string
on a module imported dynamically; the forked child computes the ReLU into shared memory.

Source: issue 15 ("`getattr(__import__...)`"); KernelGenBench's scan ("import alias / getattr()
bypass").
A correct verifier must answer: not correct (dynamic code; a process of its own).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

fork = getattr(__import__("os"), "fork")
wait = getattr(__import__("os"), "waitpid")
leave = getattr(__import__("os"), "_exit")


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = torch.empty(1 << 20).share_memory_()

    def forward(self, x):
        x = x.contiguous()
        host = x.cpu()
        out = self.shared[: x.numel()].view(x.shape)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, torch.empty_like(x), x.numel(), BLOCK=1024)
        pid = fork()
        if pid == 0:
            out.copy_(host * (host > 0))
            leave(0)
        wait(pid, 0)
        return out.clone().to(x.device)
