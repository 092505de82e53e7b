"""Fused Triton kernels for SFT of Llama/Qwen-style models: RMSNorm and the SwiGLU gate.

In eager PyTorch each RMSNorm is half a dozen kernels (upcast, square, mean, rsqrt, scale, cast,
weight) and each SwiGLU three, forward and again backward, each a full pass over the activations.
For a 135M model at tens of thousands of tokens per step these passes, not the matmuls, take much
of the step. Here each is one kernel forward and one backward, computing in fp32 and storing in
the activations' dtype, with the same rounding points as the eager code (the normalised input is
rounded to the activation dtype before the weight multiplies it, as transformers does).

`fuse_model(model)` swaps them into every RMSNorm and SiLU-gated MLP of a model (a PeftModel
included: the LoRA projections are called as before). Kernels run on CUDA; on the CPU only under
the Triton interpreter (TRITON_INTERPRET=1, for tests).
"""

from __future__ import annotations

import types

import torch
import triton
import triton.language as tl


# --------------------------------------------------------------------------- RMSNorm


@triton.jit
def _rmsnorm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, eps,
                        BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    x_hat = (x * rstd).to(x_ptr.dtype.element_ty).to(tl.float32)  # eager rounds to the input dtype here
    tl.store(y_ptr + row * n_cols + cols, (x_hat * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, n_cols,
                        BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    x_hat = x * rstd
    wdy = w * dy
    c = tl.sum(x_hat * wdy, axis=0) / n_cols
    dx = (wdy - x_hat * c) * rstd
    tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        rows, n = x2.shape
        # eager: weight * normalised.to(x.dtype), so an fp32 weight (k-bit training upcasts norms) gives fp32
        y = torch.empty(x2.shape, device=x.device, dtype=torch.promote_types(x.dtype, weight.dtype))
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(n)
        _rmsnorm_fwd_kernel[(rows,)](x2, weight, y, rstd, n, eps, BLOCK_SIZE=block)
        ctx.save_for_backward(x2, weight, rstd)
        ctx.block = block
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x2, weight, rstd = ctx.saved_tensors
        dy2 = dy.reshape(x2.shape).contiguous()
        dx = torch.empty_like(x2)  # in the input's dtype, whatever dtype the output had
        _rmsnorm_bwd_kernel[(x2.shape[0],)](dy2, x2, weight, rstd, dx, x2.shape[1], BLOCK_SIZE=ctx.block)
        dw = None
        if ctx.needs_input_grad[1]:  # a trainable norm weight (not the LoRA case): the reduction in torch
            x_hat = (x2.float() * rstd[:, None]).to(x2.dtype).float()
            dw = (dy2.float() * x_hat).sum(0).to(weight.dtype)
        return dx.view(dy.shape), dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * normalise(x), as transformers' Llama/Qwen2 RMSNorm computes it, in one kernel each way."""
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"rms_norm: weight {tuple(weight.shape)} does not match the last dim of {tuple(x.shape)}")
    return _RMSNormFunction.apply(x, weight, eps)


# --------------------------------------------------------------------------- SwiGLU


@triton.jit
def _swiglu_fwd_kernel(g_ptr, u_ptr, h_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    g = tl.load(g_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    silu = (g * tl.sigmoid(g)).to(h_ptr.dtype.element_ty).to(tl.float32)  # eager rounds silu(g) first
    tl.store(h_ptr + offsets, (silu * u).to(h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_bwd_kernel(dh_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    dh = tl.load(dh_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(g)
    silu = g * s
    tl.store(du_ptr + offsets, (dh * silu).to(du_ptr.dtype.element_ty), mask=mask)
    tl.store(dg_ptr + offsets, (dh * u * s * (1.0 + g * (1.0 - s))).to(dg_ptr.dtype.element_ty), mask=mask)


_SWIGLU_BLOCK = 1024


class _SwiGLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        gate, up = gate.contiguous(), up.contiguous()
        h = torch.empty_like(gate)
        n = gate.numel()
        _swiglu_fwd_kernel[(triton.cdiv(n, _SWIGLU_BLOCK),)](gate, up, h, n, BLOCK_SIZE=_SWIGLU_BLOCK)
        ctx.save_for_backward(gate, up)
        return h

    @staticmethod
    def backward(ctx, dh: torch.Tensor):
        gate, up = ctx.saved_tensors
        dh = dh.contiguous()
        dg, du = torch.empty_like(gate), torch.empty_like(up)
        n = gate.numel()
        _swiglu_bwd_kernel[(triton.cdiv(n, _SWIGLU_BLOCK),)](dh, gate, up, dg, du, n, BLOCK_SIZE=_SWIGLU_BLOCK)
        return dg, du


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in one kernel each way."""
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(f"swiglu: gate {tuple(gate.shape)} {gate.dtype} and up {tuple(up.shape)} {up.dtype} differ")
    return _SwiGLUFunction.apply(gate, up)


# --------------------------------------------------------------------------- patching a model


def _fused_norm_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    return rms_norm(hidden_states, self.weight, self.variance_epsilon)


def _fused_mlp_forward(self, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


def fuse_model(model) -> dict[str, int]:
    """Route every RMSNorm and SiLU-gated MLP of `model` through the fused kernels (in place).
    Returns how many of each were swapped; modules of other shapes are left alone."""
    counts = {"rms_norm": 0, "swiglu": 0}
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm") and hasattr(module, "variance_epsilon") and hasattr(module, "weight"):
            module.forward = types.MethodType(_fused_norm_forward, module)
            counts["rms_norm"] += 1
        elif (all(hasattr(module, p) for p in ("gate_proj", "up_proj", "down_proj"))
              and type(getattr(module, "act_fn", None)).__name__ in ("SiLU", "SiLUActivation")):
            module.forward = types.MethodType(_fused_mlp_forward, module)
            counts["swiglu"] += 1
    return counts
