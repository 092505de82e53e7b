# the CPU compile check runs with the op census paused (EV_PAUSE) and, converting each launch
# argument, reads `getattr(v, "fn", None)`. An argument object whose `fn` is a property runs the
# candidate's PyTorch compute there, unseen. The object is passed as an unused tl.constexpr argument.
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Box:
    def __init__(self, x):
        self.x = x
        self.y = None

    @property
    def fn(self):
        if self.y is None:
            self.y = torch.relu(self.x)
        return None


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BOX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def copy_kernel2(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        box = Box(x)
        scratch = torch.empty(16, device=x.device)
        copy_kernel[(1,)](scratch, scratch, 16, box, BLOCK=16)
        y = box.y
        out = torch.empty_like(y)
        copy_kernel2[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
