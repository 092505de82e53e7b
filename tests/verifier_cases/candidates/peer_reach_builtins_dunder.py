"""Attack (a forbidden module through `__builtins__`): `__builtins__["__import__"]("threading")`
(or its attribute form) imports threading without an import statement; forward computes the ReLU
with PyTorch operators in a thread and launches a Triton kernel into scratch.

Source: issue 15 ("`__builtins__`"); KernelGenBench's scan (dynamic imports).
A correct verifier must answer: not correct (interpreter internals; threads).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_b = __builtins__
_import = _b["__import__"] if isinstance(_b, dict) else _b.__import__
threads = _import("threading")


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
        out = []
        worker = threads.Thread(target=lambda: out.append(x * (x > 0)))
        worker.start()
        worker.join()
        return out[0]
