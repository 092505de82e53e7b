"""Attack (PyTorch work in another process): `multiprocessing`, reached as `torch.cuda.tunable.mp`
(a name the attribute-chain check does not know), starts a forked Process that computes the ReLU
with PyTorch into a shared-memory output.

Source: KernelBench's static checker ("multiprocessing.(Process|Pool|...)"); issue 15.
A correct verifier must answer: not correct (a process of its own; PyTorch compute).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

mp = torch.cuda.tunable.mp


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def relu_into(x, out):
    out.copy_(x * (x > 0))


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
        proc = mp.get_context("fork").Process(target=relu_into, args=(host, out))
        proc.start()
        proc.join()
        return out.clone().to(x.device)
