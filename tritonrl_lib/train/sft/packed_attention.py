"""Attention for padding-free (packed) SFT batches: every sequence attends only to itself.

TRL's padding-free collator flattens a micro-batch into one row and marks where each sequence
starts (`position_ids` restart at 0; `cu_seq_lens_q` holds the boundaries). Plain SDPA over that
row would let sequences attend across each other; transformers' `sdpa` path avoids that by
materialising a block-diagonal mask over the whole row, which is correct but quadratic in the
row and keeps SDPA off its flash kernel. FlashAttention-2's varlen kernel is the usual answer,
but the GPU image has no `flash-attn` package.

So this module registers its own attention implementation with transformers:

- `varlen`: PyTorch's built-in varlen flash kernel (`torch.nn.attention.varlen.varlen_attn`),
  one launch for the whole packed row (CUDA, bf16/fp16).
- `loop`: one causal SDPA call per sequence (any device, any dtype). Exact and cheap on the
  CPU; on a GPU it is the fallback when the varlen kernel is missing or fails its self-check.

Batches that carry an `attention_mask` (padded batches, generation) go to transformers' own SDPA
unchanged, so a model switched to this implementation still generates normally.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

BACKENDS = ("varlen", "loop")
_NAME = {"varlen": "tritonrl_packed_varlen", "loop": "tritonrl_packed_loop"}


# --------------------------------------------------------------------------- sequence boundaries


class _Boundaries:
    """The sequence boundaries of the current packed row, computed once per forward, not per layer:
    every layer receives the same `cu_seq_lens_q` / `position_ids` tensor object."""

    source: torch.Tensor | None = None
    cu: torch.Tensor | None = None
    lengths: list[int] = []


_cache = _Boundaries()


def _boundaries(kwargs: dict[str, Any], q_len: int, kv_len: int) -> tuple[torch.Tensor, list[int]] | None:
    """(cu_seq_lens as int32 on the device, python list of lengths) for a packed row, else None."""
    cu = kwargs.get("cu_seq_lens_q")
    pos = kwargs.get("position_ids")
    source = cu if cu is not None else pos
    if source is None or q_len != kv_len:
        return None
    if _cache.source is source:
        return _cache.cu, _cache.lengths
    if cu is not None:
        cu = cu.to(torch.int32)
    else:
        if pos.dim() != 2 or pos.shape[0] != 1:
            return None
        starts = (pos[0] == 0).nonzero().flatten()
        if starts.numel() == 0 or int(starts[0]) != 0:
            return None
        cu = torch.cat([starts, starts.new_tensor([pos.shape[1]])]).to(torch.int32)
    lengths = cu.diff().tolist()
    if sum(lengths) != q_len:
        raise ValueError(f"packed sequence boundaries cover {sum(lengths)} tokens but the row holds {q_len}")
    _cache.source, _cache.cu, _cache.lengths = source, cu, lengths
    return cu, lengths


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


# --------------------------------------------------------------------------- the two kernels


def _loop_attention(q, k, v, lengths: list[int], scale: float | None, dropout: float) -> torch.Tensor:
    """q, k, v: [1, H, T, D] (kv already repeated). One causal SDPA per sequence -> [1, T, H, D]."""
    outs = []
    start = 0
    for n in lengths:
        end = start + n
        outs.append(F.scaled_dot_product_attention(q[:, :, start:end], k[:, :, start:end], v[:, :, start:end],
                                                   dropout_p=dropout, is_causal=True, scale=scale))
        start = end
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()


@functools.lru_cache(maxsize=1)
def _varlen_fn():
    """torch's varlen attention and how this torch version spells "causal" (the API moved from an
    `is_causal` flag to `window_size=(-1, 0)` between releases)."""
    from torch.nn.attention.varlen import varlen_attn

    params = inspect.signature(varlen_attn).parameters
    if "is_causal" in params:
        causal = {"is_causal": True}
    elif "window_size" in params:
        causal = {"window_size": (-1, 0)}
    else:
        raise RuntimeError("torch.nn.attention.varlen.varlen_attn takes neither is_causal nor window_size")
    return varlen_attn, causal, "scale" in params


def _varlen_attention(q, k, v, cu: torch.Tensor, lengths: list[int], scale: float | None) -> torch.Tensor:
    """q, k, v: [1, H, T, D] (kv already repeated). One varlen flash launch -> [1, T, H, D]."""
    varlen_attn, causal, takes_scale = _varlen_fn()
    q3, k3, v3 = (t[0].transpose(0, 1) for t in (q, k, v))  # [T, H, D]
    head_dim = q.shape[-1]
    kwargs = dict(causal)
    if scale is not None and abs(scale - head_dim ** -0.5) > 1e-12:
        if not takes_scale:
            raise RuntimeError("this torch's varlen_attn has no `scale` argument; the model needs a custom scale")
        kwargs["scale"] = scale
    max_len = max(lengths)
    out = varlen_attn(q3.contiguous(), k3.contiguous(), v3.contiguous(), cu, cu, max_len, max_len, **kwargs)
    if isinstance(out, tuple):  # releases that return (out, lse) by default
        out = out[0]
    return out.unsqueeze(0)


# --------------------------------------------------------------------------- the transformers hooks


def _make_forward(backend: str):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def packed_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                                 scaling: float | None = None, is_causal: bool | None = None, **kwargs):
        packed = None
        if attention_mask is None and query.shape[0] == 1 and kwargs.get("sliding_window") is None:
            packed = _boundaries(kwargs, query.shape[2], key.shape[2])
        if packed is None or len(packed[1]) == 1:
            return sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                        is_causal=is_causal, **kwargs)
        cu, lengths = packed
        n_rep = query.shape[1] // key.shape[1]
        key, value = _repeat_kv(key, n_rep), _repeat_kv(value, n_rep)
        if backend == "varlen" and dropout == 0.0:
            return _varlen_attention(query, key, value, cu, lengths, scaling), None
        return _loop_attention(query, key, value, lengths, scaling, dropout), None

    packed_attention_forward.__name__ = f"packed_attention_{backend}"
    # Under torch.compile the attention call stays eager (it reads the boundaries on the host); the
    # projections, norms and MLP around it still compile.
    return torch.compiler.disable(packed_attention_forward)


def _packed_mask(*args, **kwargs):
    """No mask for a whole row without padding (a packed row: the attention function reads its
    boundaries); SDPA's own mask otherwise (padded batches, and generation against a KV cache)."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    if kwargs.get("attention_mask") is None and not args:
        q_len, kv_len = kwargs.get("q_length"), kwargs.get("kv_length")
        if q_len is None and kwargs.get("cache_position") is not None:  # older transformers spell it so
            q_len = kwargs["cache_position"].shape[-1]
        if q_len is not None and q_len == kv_len and not kwargs.get("kv_offset") and not kwargs.get("q_offset"):
            return None
    return ALL_MASK_ATTENTION_FUNCTIONS["sdpa"](*args, **kwargs)


@functools.lru_cache(maxsize=None)
def register(backend: str) -> str:
    """Register the `backend` implementation with transformers; returns its attn_implementation name."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown packed attention backend {backend!r}; use one of {', '.join(BACKENDS)}")
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    name = _NAME[backend]
    AttentionInterface.register(name, _make_forward(backend))
    AttentionMaskInterface.register(name, _packed_mask)
    return name


def use_packed_attention(model, backend: str) -> str:
    """Switch `model` (a PreTrainedModel or a PeftModel around one) to packed attention."""
    name = register(backend)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    if getattr(cfg, "use_sliding_window", False) and getattr(cfg, "sliding_window", None):
        raise ValueError(f"{type(base).__name__} uses sliding-window attention, which packed attention does not "
                         "implement; train with packing=false")
    base.set_attn_implementation(name)
    return name


# --------------------------------------------------------------------------- choosing a backend


def _self_check(device: torch.device, dtype: torch.dtype) -> str | None:
    """Run the varlen kernel on a small packed batch against per-sequence SDPA, forward and backward.
    Returns None when it agrees, else why not."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    lengths = [37, 64, 5, 130]
    total, heads, dim = sum(lengths), 4, 64
    base = [torch.randn(1, heads, total, dim, generator=gen).to(device, dtype) for _ in range(3)]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    results = []
    for fn in ("varlen", "loop"):
        q, k, v = (t.clone().requires_grad_(True) for t in base)
        if fn == "varlen":
            out = _varlen_attention(q, k, v, cu, lengths, None)
        else:
            out = _loop_attention(q, k, v, lengths, None, 0.0)
        grad_out = torch.ones_like(out)
        out.backward(grad_out)
        results.append([out.float(), q.grad.float(), k.grad.float(), v.grad.float()])
    for name, a, b in zip(("output", "dq", "dk", "dv"), *results):
        err = (a - b).abs().max().item()
        scale = b.abs().max().item() + 1e-6
        if not err <= 2e-2 * scale + 1e-2:
            return f"varlen {name} differs from per-sequence SDPA by {err:.3g} (scale {scale:.3g})"
    return None


@functools.lru_cache(maxsize=None)
def select_backend(device_type: str, device_index: int | None, dtype: torch.dtype) -> tuple[str, str]:
    """(backend, why): `varlen` on a CUDA GPU in bf16/fp16 when torch has the kernel and it passes a
    numerical self-check against per-sequence SDPA; `loop` otherwise."""
    if device_type != "cuda":
        return "loop", f"{device_type}: per-sequence SDPA (the varlen kernel is CUDA-only)"
    if dtype not in (torch.bfloat16, torch.float16):
        return "loop", f"{dtype}: per-sequence SDPA (the varlen kernel needs bf16/fp16)"
    try:
        _varlen_fn()
    except Exception as e:  # older torch: no torch.nn.attention.varlen
        return "loop", f"no varlen kernel in torch {torch.__version__} ({type(e).__name__}: {e})"
    try:
        problem = _self_check(torch.device("cuda", device_index or 0), dtype)
    except Exception as e:
        problem = f"{type(e).__name__}: {e}"
    if problem:
        log.warning("packed attention: varlen kernel rejected (%s); using per-sequence SDPA", problem)
        return "loop", f"varlen rejected: {problem}"
    return "varlen", f"torch {torch.__version__} varlen flash kernel (self-check passed)"
