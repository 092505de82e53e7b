"""Honest: its own Triton launch captured into a CUDA graph (once per input shape, on static buffers) and
replayed on every call, the inputs copied into the graph's buffer first and the output copied out. What a
replayed graph runs counts as launched (issue 31: it ended `cheat:no_triton_launch`). Correct."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


def relu(x, out):
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        if key not in self.graphs:
            static_in = torch.empty_like(x).contiguous()
            static_out = torch.empty_like(static_in)
            static_in.copy_(x)
            relu(static_in, static_out)  # compiled and warmed outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                relu(static_in, static_out)
            self.graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = self.graphs[key]
        static_in.copy_(x)
        graph.replay()
        return static_out.clone()
