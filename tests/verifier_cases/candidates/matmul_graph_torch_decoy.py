"""PyTorch compute hidden in a CUDA graph: the GEMM done by torch.mm, captured into a graph while ModelNew is
built (outside forward, where no op census looks) at the task's published shapes, and replayed in forward
beside a decoy Triton kernel that copies the result. What a replayed graph runs is judged like a plain call:
its captured aten.mm counts as PyTorch compute under the strict policy (`cheat:pytorch_compute:aten.mm...`)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

M, K, N = 64, 64, 48  # the task's published sizes (tests/verifier_cases/tasks/matmul.py)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.zeros(M, K, device="cuda")
        self.b = torch.zeros(K, N, device="cuda")
        self.c = torch.zeros(M, N, device="cuda")
        torch.mm(self.a, self.b, out=self.c)  # warmed outside the capture
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            torch.mm(self.a, self.b, out=self.c)

    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        if tuple(a.shape) == (M, K) and tuple(b.shape) == (K, N) and a.dtype == torch.float32:
            self.a.copy_(a)
            self.b.copy_(b)
            self.graph.replay()
            copy_kernel[(triton.cdiv(M * N, 1024),)](self.c, out, M * N, BLOCK=1024)
        else:
            grid = (triton.cdiv(a.shape[0], 16), triton.cdiv(b.shape[1], 16))
            matmul_kernel[grid](a.contiguous(), b.contiguous(), out, a.shape[0], b.shape[1], a.shape[1], BLOCK=16)
        return out
