"""The lean engine: the Llama-family forward pass (Llama, Qwen2, Mistral without sliding windows:
SmolLM2, Qwen2.5-Coder, ...) over a private copy of the model's weights, for fast decoding.

A LoRA adapter is folded into the engine's copy (W + B A * scale) without touching the model; q/k/v
and gate/up are fused into one matmul each. A static KV cache holds one row per sequence; on CUDA
each decode step is captured once per (batch, length) bucket as a CUDA graph and replayed, so a
135M model is bound by the GPU, not by Python's ~1,000 kernel launches per step. Each graph is
checked against the eager step when captured; `check_logits` / `own_logits` measure the engine
against the model's own forward, and `lean_check.py` decides whether they agree.
The decode loop that drives it is `lean_generate.py`.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Sequence

log = logging.getLogger(__name__)


class UnsupportedModel(Exception):
    """The lean engine does not cover this model; the message says why (the hf engine will)."""


def _unwrap(model):
    """The HF causal LM inside a PeftModel (LoRA layers still in place) or the model itself."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _effective_linear(mod):
    """(weight, bias) a Linear applies, with active LoRA adapters folded in (model untouched)."""
    import torch

    try:
        from peft.tuners.lora import LoraLayer
    except Exception:  # peft missing: no LoRA layers can exist
        LoraLayer = ()  # type: ignore[assignment]
    if LoraLayer and isinstance(mod, LoraLayer):
        base = mod.get_base_layer()
        weight, bias = base.weight, base.bias
        if not getattr(mod, "disable_adapters", False) and not getattr(mod, "merged", False):
            acc = None
            for name in mod.active_adapters:
                if name not in mod.lora_A:
                    continue
                if name in getattr(mod, "lora_variant", {}):
                    raise UnsupportedModel(f"LoRA variant (e.g. DoRA) in adapter {name!r}")
                delta = mod.get_delta_weight(name).float()
                acc = (weight.float() if acc is None else acc) + delta
                if mod.lora_bias.get(name, False):
                    extra = mod.lora_B[name].bias * mod.scaling[name]
                    bias = extra if bias is None else bias + extra
            if acc is not None:
                weight = acc.to(weight.dtype)
    else:
        if not hasattr(mod, "weight") or mod.__class__.__name__ not in ("Linear",):
            raise UnsupportedModel(f"{mod.__class__.__name__} layers (quantised or custom linear)")
        weight, bias = mod.weight, mod.bias
    if not torch.is_floating_point(weight):
        raise UnsupportedModel(f"weights of dtype {weight.dtype} (quantised)")
    return weight, bias


class LeanDecoder:
    """The Llama-family forward pass over a private copy of the (LoRA-merged) weights, with a
    static KV cache of `rows` x `length` and optional CUDA-graph decode steps."""

    FAMILIES = ("llama", "qwen2", "mistral")

    def __init__(self, model, use_graphs: bool = True):
        import torch

        hf = _unwrap(model)
        cfg = hf.config
        reason = self.unsupported(hf)
        if reason:
            raise UnsupportedModel(reason)
        inner = hf.model
        first = inner.layers[0].self_attn
        self.n_layers = len(inner.layers)
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(first, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.rep = self.n_heads // self.n_kv
        self.scaling = float(getattr(first, "scaling", self.head_dim ** -0.5))
        self.eps = float(cfg.rms_norm_eps)
        self.qkv_sizes = [self.n_heads * self.head_dim, self.n_kv * self.head_dim, self.n_kv * self.head_dim]
        self.inter = int(cfg.intermediate_size)
        emb = inner.embed_tokens.weight
        self.device, self.dtype = emb.device, emb.dtype
        self.vocab = emb.shape[0]
        self.use_graphs = bool(use_graphs and self.device.type == "cuda")
        self._rotary = inner.rotary_emb
        self.k_cache: list = []
        self.v_cache: list = []
        self.rows = self.length = 0
        self.graphs: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.graphs_captured = 0
        self._graph_checked = False
        self._pool = None
        self._weights_from(hf, copy=True)
        self._rope_table(2048)

    # -- support and weights --------------------------------------------------------

    @classmethod
    def unsupported(cls, hf) -> str:
        cfg = hf.config
        mt = getattr(cfg, "model_type", "")
        if mt not in cls.FAMILIES:
            return f"model_type {mt!r} (the lean engine covers {', '.join(cls.FAMILIES)})"
        if getattr(cfg, "hidden_act", "silu") != "silu":
            return f"hidden_act {cfg.hidden_act!r}"
        layer_types = getattr(cfg, "layer_types", None) or []
        if any(t != "full_attention" for t in layer_types):
            return "sliding-window attention layers"
        if mt == "mistral" and getattr(cfg, "sliding_window", None):
            return "Mistral sliding-window attention"
        if mt == "qwen2" and getattr(cfg, "use_sliding_window", False):
            return "Qwen2 sliding-window attention"
        rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        if rope_type in ("dynamic", "longrope"):
            return f"rope_type {rope_type!r} (length-dependent)"
        if getattr(hf, "hf_quantizer", None) is not None or getattr(hf, "is_quantized", False):
            return "quantised weights (8/4-bit)"
        if not hasattr(hf, "model") or not hasattr(hf.model, "layers") or not hasattr(hf.model, "rotary_emb"):
            return "unexpected module layout"
        return ""

    def _weights_from(self, hf, copy: bool) -> None:
        """Collect (or, with copy=False, refresh in place) the effective weights."""
        import torch

        inner = hf.model
        emb_mod = inner.embed_tokens
        if emb_mod.__class__.__name__ != "Embedding" or hasattr(emb_mod, "lora_embedding_A"):
            raise UnsupportedModel("an adapter on the embedding layer")
        tied = getattr(hf.config, "tie_word_embeddings", False)
        head_w, head_b = _effective_linear(hf.lm_head)
        if head_b is not None:
            raise UnsupportedModel("a bias on lm_head")
        layers = []
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            entry = {"ln1": layer.input_layernorm.weight, "ln2": layer.post_attention_layernorm.weight}
            for key, mod in (("q", a.q_proj), ("k", a.k_proj), ("v", a.v_proj), ("o", a.o_proj),
                             ("g", m.gate_proj), ("u", m.up_proj), ("d", m.down_proj)):
                entry["w" + key], entry["b" + key] = _effective_linear(mod)
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                if norm.__class__.__name__ not in ("LlamaRMSNorm", "Qwen2RMSNorm", "MistralRMSNorm"):
                    raise UnsupportedModel(f"norm layer {norm.__class__.__name__}")
            layers.append(self._fuse(entry))
        fresh = {"embed": emb_mod.weight, "norm": inner.norm.weight,
                 "head": None if (tied and head_w is emb_mod.weight) else head_w, "layers": layers}
        with torch.no_grad():
            if copy:
                def own(t):
                    return None if t is None else t.detach().to(self.device).clone()
                self.embed, self.norm_w = own(fresh["embed"]), own(fresh["norm"])
                self.head = self.embed if fresh["head"] is None else own(fresh["head"])
                self.layers = [{k: own(v) for k, v in e.items()} for e in layers]
            else:
                self.embed.copy_(fresh["embed"])
                self.norm_w.copy_(fresh["norm"])
                if fresh["head"] is not None:
                    self.head.copy_(fresh["head"])
                for mine, new in zip(self.layers, layers):
                    for k, v in new.items():
                        if (v is None) != (mine[k] is None):
                            raise UnsupportedModel("the model's layout changed since the engine was built")
                        if v is not None:
                            mine[k].copy_(v)

    @staticmethod
    def _fuse(e: dict) -> dict:
        """q/k/v as one projection and gate/up as another: fewer, larger matmuls per layer."""
        import torch

        def cat(keys: str):
            w = torch.cat([e["w" + k].detach() for k in keys], 0)
            if all(e["b" + k] is None for k in keys):
                return w, None
            b = torch.cat([e["b" + k].detach() if e["b" + k] is not None else
                           torch.zeros(e["w" + k].shape[0], dtype=w.dtype, device=w.device) for k in keys])
            return w, b

        wqkv, bqkv = cat("qkv")
        wgu, bgu = cat("gu")
        return {"ln1": e["ln1"], "ln2": e["ln2"], "wqkv": wqkv, "bqkv": bqkv, "wo": e["wo"], "bo": e["bo"],
                "wgu": wgu, "bgu": bgu, "wd": e["wd"], "bd": e["bd"]}

    def refresh(self, model) -> None:
        """Copy the model's current (trained) weights into the engine; captured graphs stay valid."""
        self._weights_from(_unwrap(model), copy=False)

    def _rope_table(self, length: int) -> None:
        import torch

        pos = torch.arange(length, device=self.device).unsqueeze(0)
        probe = torch.zeros(1, 1, self.head_dim, device=self.device, dtype=self.dtype)
        with torch.no_grad():
            cos, sin = self._rotary(probe, pos)
        self.cos, self.sin = cos[0].contiguous(), sin[0].contiguous()
        self.cols = torch.arange(length, device=self.device)

    # -- cache ----------------------------------------------------------------------

    def ensure_cache(self, rows: int, length: int) -> None:
        import torch

        length = int(math.ceil(length / 128) * 128)
        if rows <= self.rows and length <= self.length:
            return
        rows, length = max(rows, self.rows), max(length, self.length)
        self.drop_graphs()  # their buffers are about to go
        self.k_cache = self.v_cache = []
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        shape = (rows, self.n_kv, length, self.head_dim)
        self.k_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.n_layers)]
        self.v_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.n_layers)]
        self.rows, self.length = rows, length
        if self.cos.shape[0] < length:
            self._rope_table(length)
        self.tok = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.pos = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.row_ids = torch.arange(rows, device=self.device)

    # -- math -----------------------------------------------------------------------

    def _rms(self, x, w):
        import torch

        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * h.to(x.dtype)

    @staticmethod
    def _rotate(x, cos, sin):
        import torch

        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _mlp(self, x, e):
        import torch.nn.functional as F

        h = self._rms(x, e["ln2"])
        gate, up = F.linear(h, e["wgu"], e["bgu"]).split(self.inter, dim=-1)
        return x + F.linear(F.silu(gate) * up, e["wd"], e["bd"])

    def prefill(self, slots, ids, lengths):
        """Run right-padded prompts `ids` (r, T) into cache rows `slots`; logits (r, V) of each
        prompt's last token."""
        import torch
        import torch.nn.functional as F

        r, T = ids.shape
        x = F.embedding(ids, self.embed)
        cos, sin = self.cos[:T].view(1, 1, T, -1), self.sin[:T].view(1, 1, T, -1)
        for i, e in enumerate(self.layers):
            h = self._rms(x, e["ln1"])
            q, k, v = F.linear(h, e["wqkv"], e["bqkv"]).split(self.qkv_sizes, dim=-1)
            q = q.reshape(r, T, self.n_heads, -1).transpose(1, 2)
            k = k.reshape(r, T, self.n_kv, -1).transpose(1, 2)
            v = v.reshape(r, T, self.n_kv, -1).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            self.k_cache[i][slots, :, :T] = k
            self.v_cache[i][slots, :, :T] = v
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scaling,
                                                 enable_gqa=self.rep > 1)
            x = x + F.linear(att.transpose(1, 2).reshape(r, T, -1), e["wo"], e["bo"])
            x = self._mlp(x, e)
        last = x[torch.arange(r, device=x.device), lengths - 1]
        return F.linear(self._rms(last, self.norm_w), self.head).float()

    def _step(self, b: int, L: int):
        """One decode step for rows [0, b): feed `tok` at `pos`, attend over columns [0, L)."""
        import torch.nn.functional as F

        tok, pos, rows = self.tok[:b], self.pos[:b], self.row_ids[:b]
        x = F.embedding(tok, self.embed)
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        mask = (self.cols[:L].unsqueeze(0) <= pos.unsqueeze(1)).view(b, 1, 1, L)
        for i, e in enumerate(self.layers):
            h = self._rms(x, e["ln1"])
            q, k, v = F.linear(h, e["wqkv"], e["bqkv"]).split(self.qkv_sizes, dim=-1)
            q = q.reshape(b, self.n_heads, -1)
            k = k.reshape(b, self.n_kv, -1)
            v = v.reshape(b, self.n_kv, -1)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            self.k_cache[i][rows, :, pos] = k
            self.v_cache[i][rows, :, pos] = v
            # Grouped-query attention without copying K/V: each KV head's `rep` query heads are
            # the "query length" of one attention call.
            att = F.scaled_dot_product_attention(q.view(b, self.n_kv, self.rep, -1), self.k_cache[i][:b, :, :L],
                                                 self.v_cache[i][:b, :, :L], attn_mask=mask, scale=self.scaling)
            x = x + F.linear(att.reshape(b, -1), e["wo"], e["bo"])
            x = self._mlp(x, e)
        return F.linear(self._rms(x, self.norm_w), self.head).float()

    def decode(self, b: int, L: int):
        """Logits (b, V) of the next token for rows [0, b); a CUDA graph replay when enabled."""
        if not self.use_graphs:
            return self._step(b, L)
        key = (b, L)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self._capture(b, L)
            if entry is None:
                return self._step(b, L)
        graph, out = entry
        graph.replay()
        return out

    def _capture(self, b: int, L: int):
        import torch

        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                eager = self._step(b, L).clone()  # warm-up; writes the same K/V the replay will
            torch.cuda.current_stream().wait_stream(stream)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                out = self._step(b, L)
            if not self._graph_checked:  # once per engine: the replay must equal the eager step
                graph.replay()
                err = (out - eager).abs().max().item()
                scale = eager.abs().max().item() + 1e-6
                if not err <= 1e-3 * scale:
                    raise RuntimeError(f"graph replay differs from the eager step (max |diff| {err:.3g})")
                self._graph_checked = True
        except Exception as exc:  # capture can fail on exotic setups: keep going, eagerly
            log.warning("rollout: CUDA graph capture failed (%s); decoding without graphs", exc)
            self.use_graphs = False
            self.drop_graphs()
            _settle_generators(self.device)
            return None
        self.graphs[(b, L)] = (graph, out)
        self.graphs_captured += 1
        return self.graphs[(b, L)]

    def drop_graphs(self) -> None:
        """Forget every captured graph and their memory pool with them: once the last graph of a pool
        is gone the allocator frees the pool, and a capture into its old handle trips an internal
        assert (PyTorch's allocator: `use_count > 0`); the next capture opens a pool of its own."""
        self.graphs.clear()
        self._pool = None

    def release(self) -> None:
        import torch

        self.drop_graphs()
        self.k_cache, self.v_cache = [], []
        self.rows = self.length = 0
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def copy_rows(self, src, dst) -> None:
        for cache in (self.k_cache, self.v_cache):
            for t in cache:
                t[dst] = t[src]

    def compact(self, keep, n_rows: int) -> None:
        """Move rows `keep` (ascending slot indices) to [0, len(keep)); rows up to n_rows go idle."""
        n = keep.shape[0]
        for cache in (self.k_cache, self.v_cache):
            for t in cache:
                t[:n] = t[keep]
        self.tok[:n] = self.tok[keep]
        self.pos[:n] = self.pos[keep]
        self.tok[n:n_rows] = 0
        self.pos[n:n_rows] = 0

    # -- self-check -------------------------------------------------------------------

    def check_logits(self, token_ids: Sequence[int]):
        """(logits, split): the engine's logits for the last few positions of `token_ids` (a
        prefill up to `split`, then decode steps), for comparing with a model's own forward; also
        leaves cache row 0 dirty (callers overwrite it)."""
        import torch

        ids = list(token_ids)[:24]
        if len(ids) < 4:
            raise ValueError("the check needs at least 4 tokens")
        split = len(ids) - 3
        self.ensure_cache(max(self.rows, 1), len(ids) + 8)
        dev = self.device
        with torch.no_grad():
            got = [self.prefill(torch.tensor([0], device=dev), torch.tensor([ids[:split]], device=dev),
                                torch.tensor([split], device=dev))[0]]
            for j in range(split, len(ids) - 1):
                self.tok[0] = ids[j]
                self.pos[0] = j
                got.append(self._step(1, self.length)[0])
        return torch.stack(got), split

    def check_against(self, model, token_ids: Sequence[int]) -> float:
        """Relative L2 error of the engine's logits against the model's own forward on `token_ids`."""
        got, split = self.check_logits(token_ids)
        return rel_error(got, own_logits(model, token_ids, split))


def own_logits(model, token_ids: Sequence[int], split: int):
    """The model's own forward (no cache) at the positions `LeanDecoder.check_logits` covers."""
    import torch

    ids = list(token_ids)[:24]
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
    return out[split - 1: len(ids) - 1]


def rel_error(a, b) -> float:
    return ((a - b).norm() / (b.norm() + 1e-9)).item()


def _settle_generators(device) -> None:
    """After a capture that failed part-way, the CUDA generator can stay registered as capturing
    (every later random draw then fails: "Offset increment outside graph capture"); a trivial capture
    that completes runs its prologue and epilogue and leaves it as before. Best effort."""
    import torch

    try:
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        scratch = torch.zeros(1, device=device)
        with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
            scratch.add_(1)
        del graph, scratch
    except Exception as exc:  # noqa: BLE001 - nothing more to do; sampling will say if it is broken
        log.warning("rollout: could not settle the CUDA generator after the failed capture (%s)", exc)
