"""Batched sampling from a policy: many completions per prompt, fast, stopping at the end of the code.

`rollout(model, tokenizer, prompts, sampling)` returns `n_samples` completions per prompt, each
with its tokens, text, why it stopped (`fence`: the closing fence of the code block, `eos`, or
`length`), and when. Two engines produce them:

- `lean` (the default where it applies): our own decode loop over the model's weights for the
  Llama family (Llama, Qwen2, Mistral without sliding windows: SmolLM2, Qwen2.5-Coder, ...).
  A static KV cache with one row per sequence, each prompt prefilled once and its KV copied to
  its n samples, sampling in torch, the stop check on the host only every few steps, finished rows
  compacted away in power-of-two batch buckets, and on CUDA each decode step replayed as a CUDA
  graph (one per batch/length bucket), so a 135M model is bound by the GPU, not by Python's
  ~1,000 kernel launches per step. A LoRA adapter is folded into the engine's copy of the
  weights (W + B A * scale), without touching the model. The engine checks itself against the
  model's own forward when built (and each CUDA graph against the eager step when captured) and
  steps aside for `hf` if they disagree.
- `hf`: `model.generate` with left padding and the same stop rule as a StoppingCriteria; any
  causal LM, PeftModel, or quantised model.

Stopping: the completion ends at the line that closes the first code block, the way
`extract.py` reads one: an opening fence line (```python, or a fence at the end of a prose line),
then a line that is only a fence at least as long (or a fence glued to the end of a code line).
The opening fence itself never stops it. Detection reads the decoded text of each token (a table
built once per tokenizer), so a fence split over several tokens (`` + `) is found too.

Determinism: the same prompts, settings, seed and device give the same completions. Sampling uses
its own torch.Generator, so the caller's RNG streams are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

log = logging.getLogger(__name__)

FINISH_REASONS = ("fence", "eos", "length")


# --------------------------------------------------------------------------- settings and results


@dataclass
class SamplingConfig:
    n_samples: int = 1
    temperature: float = 0.8  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32  # sequences decoded at once
    seed: int = 0
    stop_at_fence: bool = True
    engine: str = "auto"  # auto (lean where supported, else hf) | lean | hf
    cuda_graphs: bool = True  # lean engine on CUDA only
    check_every: int = 0  # host-side stop check every k decode steps; 0 = 8 on CUDA, 1 on CPU
    return_logprobs: bool = False  # log p(token) under softmax(logits / temperature), per token

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {self.n_samples}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size (rollout_batch_size) must be at least 1, got {self.batch_size}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.engine not in ("auto", "lean", "hf"):
            raise ValueError(f"engine={self.engine!r}: expected auto, lean or hf")

    @classmethod
    def from_config(cls, cfg, **overrides: Any) -> "SamplingConfig":
        """The RL stage's sampling settings from a RunConfig (overrides win)."""
        rl = cfg.rl
        base = dict(n_samples=rl.n_samples, temperature=rl.temperature, top_p=rl.top_p,
                    max_new_tokens=rl.max_new_tokens, batch_size=rl.rollout_batch_size, seed=cfg.seed)
        base.update(overrides)
        return cls(**base)


@dataclass
class Completion:
    prompt_index: int
    sample_index: int
    text: str  # decoded without special tokens
    token_ids: list[int]  # what the model generated, through the stop token
    num_tokens: int
    prompt_tokens: int
    finish_reason: str  # fence | eos | length
    seconds: float  # from the start of its batch to the step its stop was seen
    logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RolloutStats:
    engine: str = ""
    device: str = ""
    sequences: int = 0
    prompts: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    wall_s: float = 0.0
    prefill_s: float = 0.0
    decode_steps: int = 0
    batches: int = 0
    cuda_graphs: int = 0  # graphs captured during this call
    compactions: int = 0  # times finished rows were dropped from the decode batch
    finish_reasons: dict[str, int] = field(default_factory=dict)
    note: str = ""  # why the lean engine was not used, when it was not

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens_per_s"] = round(self.tokens_per_s, 1)
        return d


@dataclass
class RolloutResult:
    completions: list[list[Completion]]  # [prompt][sample]
    stats: RolloutStats

    def flat(self) -> list[Completion]:
        return [c for group in self.completions for c in group]


# --------------------------------------------------------------------------- stop detection

_OPEN_LINE = re.compile(r"^[ \t]*(?P<fence>`{3,})[ \t]*(?P<info>[^`\n]*)$")
_MIDLINE_OPEN = re.compile(r"\S.*?(?P<fence>`{3,})[ \t]*(?P<info>[A-Za-z][\w+.#-]*)?[ \t]*$")
_CLOSE_LINE = re.compile(r"^[ \t]*(?P<fence>`{3,})[ \t]*$")
_GLUED_CLOSE = re.compile(r"^(?P<code>.*?\S)[ \t]*(?P<fence>`{3,})[ \t]*$")


class FenceStop:
    """Watches one completion's text, a token at a time, for the line closing its first code block."""

    __slots__ = ("inside", "open_len", "line", "done")

    def __init__(self) -> None:
        self.inside = False
        self.open_len = 0
        self.line = ""
        self.done = False

    def feed(self, piece: str) -> bool:
        """Add a token's text; True once the closing fence line is complete."""
        if self.done:
            return True
        if "\n" not in piece:
            self.line += piece
            return False
        parts = piece.split("\n")
        for part in parts[:-1]:
            self.line += part
            if self._end_line(self.line):
                self.done = True
                return True
            self.line = ""
        self.line = parts[-1]
        return False

    def _end_line(self, line: str) -> bool:
        if not self.inside:
            m = _OPEN_LINE.match(line)
            if m is None:
                m = _MIDLINE_OPEN.match(line)
                if m is not None and line.count("`") != len(m.group("fence")):
                    m = None
            if m is not None:
                self.inside, self.open_len = True, len(m.group("fence"))
            return False
        m = _CLOSE_LINE.match(line)
        if m is not None and len(m.group("fence")) >= self.open_len:
            return True
        g = _GLUED_CLOSE.match(line)
        return g is not None and len(g.group("fence")) >= self.open_len and "`" not in g.group("code")


def closes_code_block(text: str) -> bool:
    """Does `text` contain a complete first code block (the stop rule, on a whole string)?"""
    det = FenceStop()
    det.feed(text + ("\n" if not text.endswith("\n") else ""))
    return det.done


_PIECES: dict[tuple, list[str]] = {}


def token_pieces(tokenizer) -> list[str]:
    """Decoded text of every token id (cached per tokenizer); only ASCII matters to the stop rule,
    so a lone byte of a multi-byte character decoding to U+FFFD is harmless."""
    key = (getattr(tokenizer, "name_or_path", ""), len(tokenizer), type(tokenizer).__name__)
    table = _PIECES.get(key)
    if table is None:
        table = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
        _PIECES[key] = table
    return table


def stop_token_ids(model, tokenizer) -> list[int]:
    """End-of-turn ids: the tokenizer's eos plus the model's generation_config eos (int or list)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    return sorted(ids)


class _Tracker:
    """Host-side state of one sequence while it decodes."""

    __slots__ = ("prompt_index", "sample_index", "prompt_len", "tokens", "logprobs", "fence", "reason", "seconds")

    def __init__(self, prompt_index: int, sample_index: int, prompt_len: int, fence: bool):
        self.prompt_index, self.sample_index, self.prompt_len = prompt_index, sample_index, prompt_len
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.fence = FenceStop() if fence else None
        self.reason = ""
        self.seconds = 0.0

    def push(self, token: int, piece: str, eos: frozenset, max_new: int, logprob: float | None = None) -> bool:
        """Add one generated token; True when the sequence has finished."""
        if self.reason:
            return True
        self.tokens.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
        if token in eos:
            self.reason = "eos"
        elif self.fence is not None and self.fence.feed(piece):
            self.reason = "fence"
        elif len(self.tokens) >= max_new:
            self.reason = "length"
        return bool(self.reason)


# --------------------------------------------------------------------------- the lean engine


class UnsupportedModel(Exception):
    """The lean engine does not cover this model; the message says why (the hf engine will)."""


# The lean engine is the model's function computed another way. In float32 the two agree to
# rounding. In bf16/fp16 each rounds differently, and how far apart that leaves their logits
# depends on the weights: ~2-5% for the bare embedded model, up to 20% for some fine-tuned adapters
# (measured on an H200, benchmarks/lean_check.py), against 50-150% for a real mistake. So in half
# precision a gap over HALF_TOL is settled by float32: the engine is accepted when it is no further
# from the model's float32 forward than the model's own half-precision forward is (with a margin).
FP32_TOL = 1e-4
HALF_TOL = 0.1
HALF_MARGIN = 1.5
FP32_ARBITER_MAX_PARAMS = 3_000_000_000  # a float32 copy of larger models is too big to make on the fly


def lean_agrees(lean: "LeanDecoder", model, ids: Sequence[int]) -> tuple[bool, str]:
    """Whether the engine computes the model's function; (ok, what was measured)."""
    import copy

    import torch

    got, split = lean.check_logits(ids)
    own = own_logits(model, ids, split)
    err = _rel_error(got, own)
    if lean.dtype == torch.float32:
        return err <= FP32_TOL, f"its logits differ from the model's own forward (relative error {err:.2e})"
    if err <= HALF_TOL:
        return True, ""
    n_params = sum(p.numel() for p in model.parameters())
    if n_params > FP32_ARBITER_MAX_PARAMS:
        return False, (f"its logits differ from the model's own {lean.dtype} forward by {err:.2e} (relative), "
                       f"and the model is too large for a float32 comparison")
    try:
        m32 = copy.deepcopy(model).float()
    except Exception as exc:  # out of memory, weights that cannot widen, a model that does not copy
        return False, f"its logits differ from the model's own forward ({err:.2e}) and no float32 copy: {exc}"
    try:
        truth = own_logits(m32, ids, split)
    finally:
        del m32
        if lean.device.type == "cuda":
            torch.cuda.empty_cache()
    e_lean, e_own = _rel_error(got, truth), _rel_error(own, truth)
    ok = e_lean <= max(HALF_TOL, HALF_MARGIN * e_own)
    return ok, (f"its logits are {e_lean:.2e} (relative) from the model's float32 forward, the model's own "
                f"{str(lean.dtype).replace('torch.', '')} forward {e_own:.2e}")


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
        self.graphs.clear()  # their buffers are about to go
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
            self.graphs.clear()
            return None
        self.graphs[(b, L)] = (graph, out)
        self.graphs_captured += 1
        return self.graphs[(b, L)]

    def release(self) -> None:
        import torch

        self.graphs.clear()
        self.k_cache, self.v_cache = [], []
        self.rows = self.length = 0
        self._pool = None
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
        return _rel_error(got, own_logits(model, token_ids, split))


def own_logits(model, token_ids: Sequence[int], split: int):
    """The model's own forward (no cache) at the positions `LeanDecoder.check_logits` covers."""
    import torch

    ids = list(token_ids)[:24]
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
    return out[split - 1: len(ids) - 1]


def _rel_error(a, b) -> float:
    return ((a - b).norm() / (b.norm() + 1e-9)).item()


# --------------------------------------------------------------------------- sampling


def _sample(logits, temperature: float, top_p: float, generator, want_logprobs: bool):
    """Next tokens (b,) and, when asked, log p(token) under softmax(logits / temperature)."""
    import torch

    if temperature == 0:
        tokens = logits.argmax(-1)
        scaled = logits
    else:
        scaled = logits / temperature
        if top_p < 1.0:
            sorted_logits, order = torch.sort(scaled, descending=True)
            probs = torch.softmax(sorted_logits, -1)
            drop = (probs.cumsum(-1) - probs) > top_p  # keeps the first token always
            probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), -1)
            noise = torch.empty_like(probs).exponential_(generator=generator)
            tokens = order.gather(-1, (probs / noise).argmax(-1, keepdim=True)).squeeze(-1)
        else:
            probs = torch.softmax(scaled, -1)
            noise = torch.empty_like(probs).exponential_(generator=generator)
            tokens = (probs / noise).argmax(-1)  # an exponential race: an exact sample, no host sync
    lp = None
    if want_logprobs:
        lp = torch.log_softmax(scaled, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, lp


# --------------------------------------------------------------------------- the engines


def _sync(device) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)


def _buckets(n: int) -> list[int]:
    out, b = [], 8
    while b < n:
        out.append(b)
        b *= 2
    return out + [n]


class _Plan:
    """Sequences (prompt, sample) ordered by prompt length, cut into batches of whole prompts
    where possible."""

    def __init__(self, lengths: list[int], n: int, batch: int):
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        seqs = [(p, s) for p in order for s in range(n)]
        self.batches = [seqs[i:i + batch] for i in range(0, len(seqs), batch)]


class Rollout:
    """A sampler bound to one model and tokenizer. Reuse it across rounds (call `refresh()`
    after training the model) so the lean engine keeps its buffers and CUDA graphs."""

    def __init__(self, model, tokenizer, engine: str = "auto", cuda_graphs: bool = True):
        self.model = model
        self.tokenizer = tokenizer
        self.pieces = token_pieces(tokenizer)
        self.eos = frozenset(stop_token_ids(model, tokenizer))
        self.engine_name = "hf"
        self.note = ""
        self.lean: LeanDecoder | None = None
        if engine not in ("auto", "lean", "hf"):
            raise ValueError(f"engine={engine!r}: expected auto, lean or hf")
        if engine in ("auto", "lean"):
            self._build_lean(cuda_graphs, required=engine == "lean")

    def _build_lean(self, cuda_graphs: bool, required: bool) -> None:
        try:
            lean = LeanDecoder(self.model, use_graphs=cuda_graphs)
            probe = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "def relu(x):\n    return x.clamp(min=0)"}],
                tokenize=False, add_generation_prompt=True)
            ids = self.tokenizer(probe, add_special_tokens=False)["input_ids"]
            was_training = self.model.training
            self.model.eval()
            try:
                agrees, why = lean_agrees(lean, self.model, ids)
            finally:
                self.model.train(was_training)
            if not agrees:
                raise UnsupportedModel(why)
            self.lean, self.engine_name = lean, "lean"
            if why:  # settled by the float32 comparison: say so beside the numbers
                self.note = f"lean engine checked against float32: {why}"
        except UnsupportedModel as exc:
            if required:
                raise
            self.note = f"lean engine not used: {exc}"
            log.info("rollout: %s; using model.generate", self.note)

    def refresh(self) -> None:
        """Pick up the model's current weights (after an optimizer step or a round of training)."""
        if self.lean is not None:
            self.lean.refresh(self.model)

    def release(self) -> None:
        """Free the KV cache and CUDA graphs (e.g. while training); the next call rebuilds them."""
        if self.lean is not None:
            self.lean.release()

    # -- entry point --------------------------------------------------------------------

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], sampling: SamplingConfig,
                 progress: bool = False) -> RolloutResult:
        import torch

        if len(prompts) == 0:
            return RolloutResult([], RolloutStats(engine=self.engine_name))
        if isinstance(prompts[0], str):
            enc = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        else:
            enc = [list(map(int, p)) for p in prompts]
        if any(len(p) == 0 for p in enc):
            raise ValueError("an empty prompt: every prompt needs at least one token")
        stats = RolloutStats(engine=self.engine_name, device=str(self._device()), prompts=len(enc),
                             note=self.note)
        was_training = self.model.training
        self.model.eval()
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                if self.lean is not None:
                    trackers = self._generate_lean(enc, sampling, stats, progress)
                else:
                    trackers = self._generate_hf(enc, sampling, stats, progress)
        finally:
            self.model.train(was_training)
        stats.wall_s = time.perf_counter() - t0
        return self._finish(enc, trackers, sampling, stats)

    def _device(self):
        try:
            return next(self.model.parameters()).device
        except StopIteration:
            import torch

            return torch.device("cpu")

    def _finish(self, enc, trackers: list[_Tracker], sampling: SamplingConfig, stats: RolloutStats) -> RolloutResult:
        texts = self.tokenizer.batch_decode([t.tokens for t in trackers], skip_special_tokens=True)
        groups: list[list[Completion | None]] = [[None] * sampling.n_samples for _ in enc]
        for t, text in zip(trackers, texts):
            groups[t.prompt_index][t.sample_index] = Completion(
                prompt_index=t.prompt_index, sample_index=t.sample_index, text=text, token_ids=list(t.tokens),
                num_tokens=len(t.tokens), prompt_tokens=t.prompt_len, finish_reason=t.reason or "length",
                seconds=round(t.seconds, 4), logprobs=list(t.logprobs) if sampling.return_logprobs else None)
            stats.finish_reasons[t.reason or "length"] = stats.finish_reasons.get(t.reason or "length", 0) + 1
        stats.sequences = len(trackers)
        stats.generated_tokens = sum(len(t.tokens) for t in trackers)
        stats.prompt_tokens = sum(len(p) for p in enc)
        return RolloutResult([list(g) for g in groups], stats)  # type: ignore[arg-type]

    def _progress(self, total: int, enabled: bool):
        if not enabled:
            return contextlib.nullcontext(None)
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="rollout", unit="seq")

    # -- lean -----------------------------------------------------------------------------

    def _generate_lean(self, enc, sampling: SamplingConfig, stats: RolloutStats, progress: bool) -> list[_Tracker]:
        import torch

        lean = self.lean
        assert lean is not None
        dev = lean.device
        gen = torch.Generator(device=dev)
        gen.manual_seed(int(sampling.seed))
        n, max_new = sampling.n_samples, sampling.max_new_tokens
        check_every = sampling.check_every or (8 if dev.type == "cuda" else 1)
        plan = _Plan([len(p) for p in enc], n, sampling.batch_size)
        rows = min(sampling.batch_size, len(enc) * n)
        lean.ensure_cache(rows, max(len(p) for p in enc) + max_new)
        graphs_before = lean.graphs_captured
        prefill_tokens = 16384 if dev.type == "cuda" else 2048
        all_trackers: list[_Tracker] = []
        with self._progress(sum(len(b) for b in plan.batches), progress) as bar:
            for batch in plan.batches:
                stats.batches += 1
                _sync(dev)
                t_batch = time.perf_counter()
                trackers = [_Tracker(p, s, len(enc[p]), sampling.stop_at_fence) for p, s in batch]
                all_trackers.extend(trackers)
                b = len(batch)
                # prefill each distinct prompt once, into the slot of its first sample
                first_slot: dict[int, int] = {}
                for slot, (p, _) in enumerate(batch):
                    first_slot.setdefault(p, slot)
                uniq = list(first_slot.items())
                logits = torch.empty(b, lean.vocab, device=dev, dtype=torch.float32)
                t_pre = time.perf_counter()
                i = 0
                while i < len(uniq):
                    width = len(enc[uniq[i][0]])  # uniq is longest-first
                    j = i + max(1, prefill_tokens // max(width, 1))
                    part = uniq[i:j]
                    ids = torch.zeros(len(part), width, dtype=torch.long)
                    for r, (p, _) in enumerate(part):
                        ids[r, :len(enc[p])] = torch.tensor(enc[p])
                    slots = torch.tensor([s for _, s in part], device=dev)
                    lengths = torch.tensor([len(enc[p]) for p, _ in part], device=dev)
                    logits[slots] = lean.prefill(slots, ids.to(dev), lengths)
                    i = j
                src = [first_slot[p] for p, _ in batch]
                dup = [s for s in range(b) if src[s] != s]
                if dup:
                    dst_t = torch.tensor(dup, device=dev)
                    src_t = torch.tensor([src[s] for s in dup], device=dev)
                    lean.copy_rows(src_t, dst_t)
                    logits[dst_t] = logits[src_t]
                _sync(dev)
                stats.prefill_s += time.perf_counter() - t_pre

                lens = torch.tensor([len(enc[p]) for p, _ in batch], device=dev)
                hist = torch.zeros(b, max_new, dtype=torch.long, device=dev)
                lp_hist = torch.zeros(b, max_new, dtype=torch.float32, device=dev) if sampling.return_logprobs else None
                slot_of = list(range(b))  # slot -> tracker index
                cur_b = b
                buckets = _buckets(b)
                tok, lp = _sample(logits, sampling.temperature, sampling.top_p, gen, sampling.return_logprobs)
                hist[:, 0] = tok
                if lp_hist is not None:
                    lp_hist[:, 0] = lp
                lean.tok[:b] = tok
                lean.pos[:b] = lens
                max_len = int(max(len(enc[p]) for p, _ in batch))
                checked = 0  # tokens [0, checked) of every live row have been read on the host
                step = 0  # index of the last sampled token
                active = b
                while True:
                    due = step + 1 - checked >= check_every or step + 1 >= max_new
                    if due:
                        before_b = cur_b
                        active, cur_b = self._check(trackers, slot_of, hist, lp_hist, checked, step + 1, cur_b,
                                                    max_new, t_batch, buckets, lean, bar)
                        stats.compactions += cur_b < before_b
                        checked = step + 1
                        if active == 0 or step + 1 >= max_new:
                            break
                    L = min(lean.length, int(math.ceil((max_len + step + 1) / 128) * 128))
                    logits = lean.decode(cur_b, L)
                    tok, lp = _sample(logits, sampling.temperature, sampling.top_p, gen, sampling.return_logprobs)
                    step += 1
                    stats.decode_steps += 1
                    hist[:cur_b, step] = tok
                    if lp_hist is not None:
                        lp_hist[:cur_b, step] = lp
                    lean.tok[:cur_b] = tok
                    lean.pos[:cur_b] += 1
                for tr in trackers:  # rows still running at max_new_tokens
                    if not tr.reason:
                        tr.reason = "length"
                        tr.seconds = time.perf_counter() - t_batch
        stats.cuda_graphs = lean.graphs_captured - graphs_before
        return all_trackers

    def _check(self, trackers, slot_of, hist, lp_hist, start: int, stop: int, cur_b: int, max_new: int,
               t_batch: float, buckets: list[int], lean: LeanDecoder, bar) -> tuple[int, int]:
        """Read tokens [start, stop) of the live rows on the host, finish rows that stopped, and
        compact the batch when it fits a smaller bucket. -> (live rows, rows decoded from now)."""
        import torch

        block = hist[:cur_b, start:stop].tolist()
        lps = lp_hist[:cur_b, start:stop].tolist() if lp_hist is not None else None
        now = time.perf_counter() - t_batch
        live = []
        for slot in range(cur_b):
            ti = slot_of[slot]
            if ti < 0:
                continue
            tr = trackers[ti]
            if tr.reason:
                continue
            row = block[slot]
            for j, token in enumerate(row):
                if tr.push(token, self.pieces[token] if token < len(self.pieces) else "", self.eos, max_new,
                           lps[slot][j] if lps is not None else None):
                    break
            if tr.reason:
                tr.seconds = now
                if bar is not None:
                    bar.update(1)
            else:
                live.append(slot)
        target = next(bk for bk in buckets if bk >= max(len(live), 1))
        if live and target < cur_b:
            keep = torch.tensor(live, device=lean.device)
            lean.compact(keep, target)
            hist[:len(live)] = hist[keep]
            if lp_hist is not None:
                lp_hist[:len(live)] = lp_hist[keep]
            new_slots = [slot_of[s] for s in live] + [-1] * (target - len(live))
            slot_of[:] = new_slots + [-1] * (len(slot_of) - len(new_slots))
            cur_b = target
        return len(live), cur_b

    # -- hf ------------------------------------------------------------------------------

    def _generate_hf(self, enc, sampling: SamplingConfig, stats: RolloutStats, progress: bool) -> list[_Tracker]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        dev = self._device()
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos or {0})
        plan = _Plan([len(p) for p in enc], sampling.n_samples, sampling.batch_size)
        rollout = self
        all_trackers: list[_Tracker] = []

        class _Stop(StoppingCriteria):
            def __init__(self, trackers: list[_Tracker], t0: float):
                self.trackers, self.t0, self.seen = trackers, t0, 0

            def __call__(self, input_ids, scores, **kwargs):
                last = input_ids[:, -1].tolist()
                now = time.perf_counter() - self.t0
                done = []
                for tr, token in zip(self.trackers, last):
                    if not tr.reason:
                        piece = rollout.pieces[token] if token < len(rollout.pieces) else ""
                        if tr.push(token, piece, rollout.eos, sampling.max_new_tokens):
                            tr.seconds = now
                    done.append(bool(tr.reason))
                return torch.tensor(done, device=input_ids.device)

        with self._progress(sum(len(b) for b in plan.batches), progress) as bar, \
                torch.random.fork_rng(devices=[dev.index if dev.index is not None else torch.cuda.current_device()]
                                      if dev.type == "cuda" else []):
            for bi, batch in enumerate(plan.batches):
                stats.batches += 1
                torch.manual_seed(int(sampling.seed) * 1000003 + bi)
                trackers = [_Tracker(p, s, len(enc[p]), sampling.stop_at_fence) for p, s in batch]
                all_trackers.extend(trackers)
                width = max(len(enc[p]) for p, _ in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, (p, _) in enumerate(batch):
                    ids[r, width - len(enc[p]):] = torch.tensor(enc[p])  # left padding
                    mask[r, width - len(enc[p]):] = 1
                kwargs: dict[str, Any] = dict(max_new_tokens=sampling.max_new_tokens, pad_token_id=pad,
                                              eos_token_id=sorted(self.eos) or None, use_cache=True)
                if sampling.temperature > 0:
                    kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
                else:
                    kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
                _sync(dev)
                t0 = time.perf_counter()
                stopper = _Stop(trackers, t0)
                self.model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                                    stopping_criteria=StoppingCriteriaList([stopper]), **kwargs)
                _sync(dev)
                for tr in trackers:
                    if not tr.reason:
                        tr.reason = "length"
                        tr.seconds = time.perf_counter() - t0
                if bar is not None:
                    bar.update(len(batch))
        if sampling.return_logprobs:
            self._score_logprobs(enc, all_trackers, sampling)
        return all_trackers

    def _score_logprobs(self, enc, trackers: list[_Tracker], sampling: SamplingConfig) -> None:
        """Per-token log p under softmax(logits / T) by one forward pass per sequence (hf engine)."""
        import torch

        dev = self._device()
        temp = sampling.temperature if sampling.temperature > 0 else 1.0
        for tr in trackers:
            if not tr.tokens:
                continue
            ids = torch.tensor([enc[tr.prompt_index] + tr.tokens], device=dev)
            logits = self.model(input_ids=ids).logits[0, tr.prompt_len - 1:-1].float() / temp
            tr.logprobs = torch.log_softmax(logits, -1).gather(
                -1, torch.tensor(tr.tokens, device=dev).unsqueeze(-1)).squeeze(-1).tolist()


# --------------------------------------------------------------------------- conveniences


def rollout(model, tokenizer, prompts: Sequence[str] | Sequence[Sequence[int]], sampling: SamplingConfig,
            progress: bool = False) -> RolloutResult:
    """`n_samples` completions for each prompt (see the module doc); builds a one-off `Rollout`."""
    return Rollout(model, tokenizer, engine=sampling.engine, cuda_graphs=sampling.cuda_graphs).generate(
        prompts, sampling, progress=progress)


def task_prompts(tokenizer, tasks: Iterable) -> list[str]:
    """The chat-formatted prompt of each task (prompts.format_prompt): what RL and eval ask."""
    from .prompts import format_prompt

    return [format_prompt(tokenizer, t) for t in tasks]


__all__ = ["SamplingConfig", "Completion", "RolloutStats", "RolloutResult", "Rollout", "rollout", "FenceStop",
           "closes_code_block", "token_pieces", "stop_token_ids", "task_prompts", "LeanDecoder",
           "UnsupportedModel", "FINISH_REASONS"]
