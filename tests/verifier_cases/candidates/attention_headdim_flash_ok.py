"""Honest: flash attention in one Triton kernel, the head dimension a block of its own (HEAD_DIM, a tl.dot
operand dimension: q @ k^T sums over it). Correct at the task's sizes; the tiny set must not shrink the head
dimension below tl.dot's minimum of 16 (issue 31: at 8 it ended compile_error)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def flash_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    m0 = tl.program_id(1) * BLOCK_M
    rows = m0 + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    base = b * seq_len * HEAD_DIM
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < seq_len, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for n0 in range(0, seq_len, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        kv_mask = cols[:, None] < seq_len
        k = tl.load(k_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)).to(tl.float32) * scale
        s = tl.where(cols[None, :] < seq_len, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(tl.float32)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq_len)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, seq_len, head_dim = q.shape
        out = torch.empty_like(q)
        grid = (batch, triton.cdiv(seq_len, 16))
        flash_kernel[grid](q, k, v, out, seq_len, head_dim ** -0.5, HEAD_DIM=head_dim, BLOCK_M=16, BLOCK_N=16)
        return out
