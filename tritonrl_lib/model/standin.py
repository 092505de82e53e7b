"""Random-weight stand-ins: a model folder with a real architecture and weights that learned nothing.

No hub is reachable where tritonrl is developed, so a 7B policy's weights cannot be had; its
architecture can. `build_standin` writes an ordinary Hugging Face folder from an HF config (the
ones shipped in `params/standin/`, a config.json file, or a model folder's config): random weights
drawn as the model's own initialiser would (normal(0, initializer_range), norms at one, biases at
zero), and a tokenizer that fits the vocabulary, built offline like the tiny test model's (a BPE
learned from the project's own text, padded with filler tokens to the published size, the
published special tokens at their published ids). It has the real model's memory, kernels and
speed, and nothing else: it is for measuring only.

The weights are made one tensor at a time (on the GPU when there is one, in the target dtype) and
written in safetensors shards of `shard_mb`, so a 7B build holds about one shard in host memory,
never the whole model.

Labelled wherever it can be read: the folder's name ends in `.random-weights-standin`, its
config.json carries a `tritonrl_standin` entry, a README.md model card and `tritonrl_standin.json`
say RANDOM WEIGHTS, and `models.load_base_model` logs a warning each time one is loaded. The spec
`standin:<name>` (e.g. `-p model=standin:qwen2.5-coder-7b-instruct`) builds one into the model
cache on first use; that spec string is then what run configs, adapter markers and eval records
name as the model.

    tritonrl standin list
    tritonrl standin build qwen2.5-coder-7b-instruct --dir /tmp/models     # ~15 GB in bf16
    tritonrl standin show /tmp/models/qwen2.5-coder-7b-instruct.random-weights-standin
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ..core.paths import project_root
from .cache import ModelLoadError, build_lock, cache_root, publish
from .tiny import CHATML_TEMPLATE, tiny_corpus

log = logging.getLogger(__name__)

SUFFIX = ".random-weights-standin"
MARKER = "tritonrl_standin.json"  # written last: a folder without it is an unfinished build
CONFIG_KEY = "tritonrl_standin"  # the entry in config.json
SPEC_PREFIX = "standin:"
LABEL = ("RANDOM WEIGHTS: a same-architecture stand-in built by tritonrl for measuring memory and speed "
         "only; it has learned nothing, and nothing it writes or scores is a model's result")
DEFAULT_SPECIALS = [["<|endoftext|>", True], ["<|im_start|>", True], ["<|im_end|>", True]]
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
               r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
BUILD_FORMAT = 1  # bump when what a build writes changes: cached `standin:` folders are rebuilt


class StandinError(ModelLoadError):
    """A stand-in that cannot be built or read as asked; the message says why and what to do."""


def configs_dir() -> Path:
    return project_root() / "params" / "standin"


def available_configs() -> list[str]:
    return sorted(p.stem for p in configs_dir().glob("*.json"))


# --------------------------------------------------------------------------- sources


@dataclass
class StandinSource:
    """What a stand-in is built from: the HF config as published, and the tokenizer's layout."""

    name: str
    config: dict[str, Any]
    generation_config: dict[str, Any] | None
    regular_tokens: int  # ids [0, regular_tokens): BPE tokens, then fillers
    added_tokens: list[list[Any]]  # [content, special] from id `regular_tokens` on, in order
    eos_token: str
    pad_token: str
    hub_id: str = ""
    origin: str = ""

    def digest(self) -> str:
        """What the build depends on (not where the config file lies: every checkout shares a cached build)."""
        blob = json.dumps([{k: v for k, v in asdict(self).items() if k != "origin"}, BUILD_FORMAT],
                          sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


def load_source(name_or_path: str) -> StandinSource:
    """A config shipped in params/standin/ (by name), a JSON file (that format, or a plain HF
    config.json) or a model folder holding config.json."""
    p = Path(name_or_path).expanduser()
    shipped = configs_dir() / f"{name_or_path}.json"
    if shipped.is_file():
        p = shipped
    elif p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise StandinError(f"no stand-in config {name_or_path!r}: give one of {', '.join(available_configs()) or '(none)'} "
                           f"(files in {configs_dir()}), a config.json file or a model folder")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise StandinError(f"{p}: not valid JSON ({e})") from None
    name = p.parent.name if p.name == "config.json" else p.stem
    if "config" in data:  # the project's format: config + generation_config + tokenizer layout
        tok = data.get("tokenizer") or {}
        source = StandinSource(name=name, config=dict(data["config"]), generation_config=data.get("generation_config"),
                               regular_tokens=int(tok.get("regular_tokens", 0)),
                               added_tokens=[list(t) for t in tok.get("added_tokens", DEFAULT_SPECIALS)],
                               eos_token=tok.get("eos_token", "<|im_end|>"),
                               pad_token=tok.get("pad_token", "<|endoftext|>"),
                               hub_id=data.get("hub_id", ""), origin=str(p))
    else:  # a plain HF config.json: ChatML specials at the end of the vocabulary, ids ours (no generation config)
        source = StandinSource(name=name, config=dict(data), generation_config=None, regular_tokens=0, added_tokens=[list(t) for t in DEFAULT_SPECIALS],
                               eos_token="<|im_end|>", pad_token="<|endoftext|>", origin=str(p))
    source.config.pop(CONFIG_KEY, None)  # a stand-in's own config: build from the architecture only
    return _complete_layout(source)


def _complete_layout(s: StandinSource) -> StandinSource:
    vocab = int(s.config.get("vocab_size") or 0)
    if vocab < 300:
        raise StandinError(f"{s.origin}: vocab_size={vocab or 'missing'}; a stand-in needs at least 300 "
                           "(its tokenizer starts from the 256 byte tokens)")
    if not s.regular_tokens:
        s.regular_tokens = vocab - len(s.added_tokens)
    if s.regular_tokens < 300 or s.regular_tokens + len(s.added_tokens) > vocab:
        raise StandinError(f"{s.origin}: {s.regular_tokens} regular + {len(s.added_tokens)} added tokens do not fit "
                           f"vocab_size={vocab} (regular tokens must number at least 300)")
    contents = [t[0] for t in s.added_tokens]
    for role in ("eos_token", "pad_token"):
        if getattr(s, role) not in contents:
            raise StandinError(f"{s.origin}: {role} {getattr(s, role)!r} is not among the added tokens")
    return s


# --------------------------------------------------------------------------- tokenizer


def _filler(i: int) -> str:
    """The i-th filler token: ' ~' plus letters in byte-level spelling. Fillers are in the vocabulary
    but no merge makes them, so encoding never produces one; decoding one gives its text."""
    s = ""
    while True:
        s = "abcdefghijklmnopqrstuvwxyz"[i % 26] + s
        i //= 26
        if i == 0:
            return "\u0120~" + s


def build_tokenizer(source: StandinSource):
    """A fast BPE tokenizer of exactly `regular_tokens` + the added tokens, ids as published."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # Qwen2's published pipeline (NFC, its split pattern, byte-level): transformers 5 rebuilds a
    # qwen2 model's tokenizer with exactly this around our vocabulary, 4.x reads it from tokenizer.json,
    # so both tokenize alike.
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=source.regular_tokens, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(tiny_corpus(), trainer=trainer)
    spec = json.loads(bpe.to_str())
    vocab = spec["model"]["vocab"]
    i = 0
    while len(vocab) < source.regular_tokens:  # the project's text has only a few thousand merges in it
        tok = _filler(i)
        if tok not in vocab:
            vocab[tok] = len(vocab)
        i += 1
    bpe = Tokenizer.from_str(json.dumps(spec))
    for content, special in source.added_tokens:  # one at a time: ids follow the listed order
        token = AddedToken(content, special=bool(special), normalized=False)
        (bpe.add_special_tokens if special else bpe.add_tokens)([token])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=source.eos_token, pad_token=source.pad_token,
                                  bos_token=None, unk_token=None)
    tok.chat_template = CHATML_TEMPLATE
    want = source.regular_tokens + len(source.added_tokens)
    if len(tok) != want or tok.convert_tokens_to_ids(source.added_tokens[0][0]) != source.regular_tokens:
        raise StandinError(f"tokenizer came out with {len(tok)} tokens, expected {want} with "
                           f"{source.added_tokens[0][0]} at id {source.regular_tokens}")
    return tok


# --------------------------------------------------------------------------- weights


@dataclass
class BuildStats:
    path: str
    name: str
    seconds: float = 0.0
    weight_bytes: int = 0
    n_params: int = 0
    shards: int = 0
    device: str = ""
    dtype: str = ""
    seed: int = 0
    tokenizer_tokens: int = 0
    peak_rss_mb: float = 0.0  # peak resident memory of the building process (its whole life)
    rss_before_mb: float = 0.0  # ... and its resident memory when the build began
    peak_gpu_mb: float | None = None
    reused: bool = False

    def summary(self) -> str:
        gpu = f", peak GPU {self.peak_gpu_mb:,.0f} MB" if self.peak_gpu_mb is not None else ""
        state = "found already built" if self.reused else f"built in {self.seconds:.1f} s on {self.device}"
        return (f"stand-in {self.name} ({self.n_params / 1e9:.2f} B parameters, {self.weight_bytes / 2**30:.1f} GiB "
                f"{self.dtype} in {self.shards} shards) {state}; peak host RSS {self.peak_rss_mb:,.0f} MB "
                f"(at start {self.rss_before_mb:,.0f} MB){gpu}: {self.path}")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _weight_plan(model) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, init) of every tensor to save: init is normal, ones (norm weights) or zeros
    (biases), as the model's own initialiser draws them. Tied weights appear once."""
    names = dict(model.named_parameters())  # shared parameters appear once, under their first name
    every = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    buffers = [k for k in model.state_dict() if k not in every]
    if buffers:
        raise StandinError(f"persistent buffers {buffers[:3]} have no initial values to draw; this architecture "
                           "is not covered by stand-ins")
    plan = []
    for name, p in names.items():
        owner = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        leaf = name.rsplit(".", 1)[-1]
        if "norm" in type(owner).__name__.lower():
            init = "ones" if leaf == "weight" else "zeros"
        else:
            init = "zeros" if leaf == "bias" else "normal"
        plan.append((name, tuple(p.shape), init))
    return plan


def _shards(plan, itemsize: int, shard_bytes: int) -> list[list[int]]:
    """Indices of `plan` per shard, in order, each shard at most shard_bytes (or one larger tensor)."""
    out: list[list[int]] = [[]]
    size = 0
    for i, (_, shape, _) in enumerate(plan):
        n = math.prod(shape) * itemsize
        if out[-1] and size + n > shard_bytes:
            out.append([])
            size = 0
        out[-1].append(i)
        size += n
    return out


def _write_weights(model, folder: Path, dtype, device: str, seed: int, std: float, shard_mb: float,
                   echo: Callable[[str], None]) -> tuple[int, int, int]:
    """Draw and save every tensor; returns (parameters, bytes, shards)."""
    import torch
    from safetensors.torch import save_file

    plan = _weight_plan(model)
    itemsize = torch.empty((), dtype=dtype).element_size()
    shards = _shards(plan, itemsize, shard_mb * 2**20)
    weight_map, total, n_params = {}, 0, 0
    t0 = time.perf_counter()
    for s, indices in enumerate(shards):
        fname = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors" if len(shards) > 1 else "model.safetensors"
        tensors = {}
        for i in indices:
            name, shape, init = plan[i]
            t = torch.empty(shape, dtype=dtype, device=device)
            if init == "normal":
                g = torch.Generator(device=device)
                g.manual_seed(seed * 1_000_003 + i)
                t.normal_(0.0, std, generator=g)
            else:
                t.fill_(1.0 if init == "ones" else 0.0)
            tensors[name] = t.cpu()  # one tensor at a time on the device
            del t
            weight_map[name] = fname
            n_params += math.prod(shape)
        save_file(tensors, str(folder / fname), metadata={"format": "pt"})
        total += sum(v.numel() * itemsize for v in tensors.values())
        del tensors
        echo(f"  shard {s + 1}/{len(shards)} written ({total / 2**30:.1f} GiB, {time.perf_counter() - t0:.0f} s)")
    if len(shards) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return n_params, total, len(shards)


# --------------------------------------------------------------------------- the folder


def folder_name(source: StandinSource) -> str:
    return f"{source.name}{SUFFIX}"


def build_standin(source: StandinSource | str, parent: str | Path, *, device: str = "auto",
                  dtype: str = "bfloat16", seed: int = 0, shard_mb: float = 2048, force: bool = False,
                  echo: Callable[[str], None] | None = None) -> BuildStats:
    """Build (or find built) the stand-in of `source` as `parent/<name>.random-weights-standin`."""
    source = load_source(source) if isinstance(source, str) else source
    return _build_at(source, Path(parent).expanduser() / folder_name(source), device=device, dtype=dtype,
                     seed=seed, shard_mb=shard_mb, force=force, echo=echo or (lambda m: print(m, flush=True)))


def _build_at(source: StandinSource, final: Path, *, device: str, dtype: str, seed: int, shard_mb: float,
              force: bool, echo: Callable[[str], None]) -> BuildStats:
    if is_complete(final) and not force:
        return BuildStats(**{**read_marker(final)["build"], "path": str(final), "reused": True})
    with build_lock(final):
        if is_complete(final) and not force:
            return BuildStats(**{**read_marker(final)["build"], "path": str(final), "reused": True})
        if final.exists():
            shutil.rmtree(final)  # an unfinished build, or force
        for stale in final.parent.glob(f".build-{final.name}-*"):  # left by a killed build (we hold its lock)
            shutil.rmtree(stale, ignore_errors=True)
        build = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=final.parent))
        try:
            stats = _build_into(source, build, final, device=device, dtype=dtype, seed=seed, shard_mb=shard_mb,
                                echo=echo)
            publish(build, final)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    echo(stats.summary())
    return stats


def _build_into(source: StandinSource, build: Path, final: Path, *, device: str, dtype: str, seed: int,
                shard_mb: float, echo: Callable[[str], None]) -> BuildStats:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    t0 = time.perf_counter()
    rss0 = _rss_mb()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise StandinError("device=cuda but no CUDA GPU is visible; build with --device cpu")
        torch.cuda.reset_peak_memory_stats()
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype) or not torch_dtype.is_floating_point:
        raise StandinError(f"dtype {dtype!r} is not a floating-point torch dtype (bfloat16, float16, float32)")
    echo(f"building {final.name} from {source.origin}: the tokenizer ...")
    tok = build_tokenizer(source)
    ids = {content: tok.convert_tokens_to_ids(content) for content, _ in source.added_tokens}
    config = dict(source.config)
    config["torch_dtype"] = dtype
    if not source.hub_id:  # a plain config: its special-token ids are ours now
        config.update(bos_token_id=None, eos_token_id=ids[source.eos_token], pad_token_id=ids[source.pad_token])
    config[CONFIG_KEY] = {"label": LABEL, "random_weights": True, "source": source.name, "hub_id": source.hub_id,
                          "seed": seed, "built": time.strftime("%Y-%m-%dT%H:%M:%S")}
    # written as published (transformers 4.x keys), which 4.x and 5.x both read
    (build / "config.json").write_text(json.dumps(config, indent=2))
    gen = dict(source.generation_config or {"bos_token_id": config.get("bos_token_id"),
                                            "eos_token_id": config.get("eos_token_id"),
                                            "pad_token_id": config.get("pad_token_id")})
    (build / "generation_config.json").write_text(json.dumps(gen, indent=2))
    tok.save_pretrained(build)
    _portable_tokenizer_config(build)
    hf_config = AutoConfig.from_pretrained(build)  # what a loader will see
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    echo(f"  weights: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, drawn on {device} "
         f"in {dtype}, saved in shards of {shard_mb} MB")
    n_params, nbytes, n_shards = _write_weights(model, build, torch_dtype, device, seed,
                                                float(config.get("initializer_range", 0.02)), shard_mb, echo)
    stats = BuildStats(path=str(final), name=source.name, seconds=round(time.perf_counter() - t0, 2),
                       weight_bytes=nbytes, n_params=n_params, shards=n_shards, device=device, dtype=dtype, seed=seed,
                       tokenizer_tokens=len(tok), rss_before_mb=round(rss0, 1),
                       peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                       peak_gpu_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1)
                       if device.startswith("cuda") else None)
    (build / "README.md").write_text(_model_card(source, stats))
    marker = {"label": LABEL, "name": source.name, "hub_id": source.hub_id, "origin": source.origin,
              "digest": source.digest(), "build": asdict(stats)}
    (build / MARKER).write_text(json.dumps(marker, indent=2))
    return stats


def _portable_tokenizer_config(folder: Path) -> None:
    """transformers 5 names its tokenizer class `TokenizersBackend`, which 4.x cannot load;
    PreTrainedTokenizerFast reads the same tokenizer.json in both."""
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(cfg, indent=2))


def _model_card(source: StandinSource, stats: BuildStats) -> str:
    real = source.hub_id or source.name
    return f"""---
tags: [tritonrl-standin, random-weights, not-a-trained-model]
---
# RANDOM WEIGHTS: a stand-in for {real}, not a trained model

{LABEL}.

- Architecture: {real}'s configuration ({source.origin}), unchanged.
- Weights: drawn at random (normal, std {source.config.get('initializer_range', 0.02)}; norms one, biases zero),
  seed {stats.seed}, {stats.dtype}, {stats.n_params / 1e9:.2f} B parameters.
- Tokenizer: {stats.tokenizer_tokens} tokens (a BPE learned offline from tritonrl's own text, padded with
  filler tokens to the published size; special tokens at their published ids). Prompts come out
  at a different length than with the real tokenizer.
- Built by `tritonrl standin build` in {stats.seconds:.0f} s on {stats.device}.

What it is for: the memory and speed of training and sampling a model of this architecture
(`benchmarks/qwen7b_standin.py`). What it writes is random tokens; never report its completions,
scores or losses as a model's. For the real model, point `model:` at a folder with its weights.
"""


# --------------------------------------------------------------------------- reading folders


def is_complete(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file() and (Path(path) / "config.json").is_file()


def read_marker(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / MARKER).read_text())


def standin_label(path: str | Path) -> str | None:
    """The label of a stand-in folder (its marker, or the entry in its config.json); None for a real model."""
    p = Path(path)
    if (p / MARKER).is_file():
        info = read_marker(p)
        return f"{info.get('label', LABEL)} (stand-in for {info.get('hub_id') or info.get('name')})"
    try:
        entry = json.loads((p / "config.json").read_text()).get(CONFIG_KEY)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return f"{entry.get('label', LABEL)} (stand-in for {entry.get('hub_id') or entry.get('source')})" if entry else None


def standin_dir(spec: str, echo: Callable[[str], None] | None = None) -> Path:
    """The folder of a `standin:<name or config path>` spec, built into the model cache on first use
    (on the GPU when there is one)."""
    source = load_source(spec[len(SPEC_PREFIX):] if spec.startswith(SPEC_PREFIX) else spec)
    final = cache_root() / "models" / f"{source.name}-{source.digest()}{SUFFIX}"
    if not is_complete(final):
        say = echo or (lambda m: log.warning("%s", m))
        say(f"{spec}: building the random-weight stand-in once into {final}")
        _build_at(source, final, device="auto", dtype=str(source.config.get("torch_dtype") or "bfloat16"), seed=0,
                  shard_mb=2048, force=False, echo=say)
    return final


def check_standin(path: str | Path) -> dict[str, Any]:
    """Compare a stand-in folder with its own config: every tensor of the architecture present with
    its shape, the tokenizer no larger than the vocabulary. Reads headers only, loads no weights."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    p = Path(path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(p))
    want = {name: shape for name, shape, _ in _weight_plan(model)}
    have: dict[str, tuple[int, ...]] = {}
    for f in sorted(p.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as sf:
            for k in sf.keys():
                have[k] = tuple(sf.get_slice(k).get_shape())
    tok = AutoTokenizer.from_pretrained(p)
    problems = [f"missing {k}" for k in want if k not in have]
    problems += [f"unexpected {k}" for k in have if k not in want]
    problems += [f"{k}: shape {have[k]} vs {want[k]}" for k in want if k in have and have[k] != want[k]]
    if len(tok) > model.config.vocab_size:
        problems.append(f"tokenizer has {len(tok)} tokens, the vocabulary {model.config.vocab_size}")
    return {"ok": not problems, "problems": problems, "tensors": len(have), "tokenizer_tokens": len(tok),
            "vocab_size": model.config.vocab_size, "label": standin_label(p)}


# --------------------------------------------------------------------------- command line


def add_parser(sub) -> None:
    p = sub.add_parser("standin", help="random-weight stand-ins of real architectures, for measuring memory and speed")
    verbs = p.add_subparsers(dest="standin_command", required=True)
    v = verbs.add_parser("list", help="the HF configs shipped in params/standin/")
    v.set_defaults(func=_cmd_list)
    v = verbs.add_parser("build", help="build a stand-in folder (random weights, sharded, labelled)")
    v.add_argument("config", help="a name from `tritonrl standin list`, a config.json file or a model folder")
    v.add_argument("--dir", default=".", help="parent folder; the stand-in goes into DIR/<name>.random-weights-standin")
    v.add_argument("--device", default="auto", help="where the weights are drawn: auto (cuda if any), cuda or cpu")
    v.add_argument("--dtype", default="bfloat16", help="bfloat16 (default), float16 or float32")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--shard-mb", type=float, default=2048, help="safetensors shard size: about the host memory a build needs")
    v.add_argument("--force", action="store_true", help="build again over a finished folder")
    v.add_argument("--json", default="", help="also write the build's figures to this file")
    v.set_defaults(func=_cmd_build)
    v = verbs.add_parser("show", help="is a folder a stand-in? its label and a shape check against its config")
    v.add_argument("path")
    v.set_defaults(func=_cmd_show)


def _cmd_list(args: argparse.Namespace) -> int:
    for name in available_configs():
        s = load_source(name)
        c = s.config
        print(f"{name:32s} {s.hub_id or '-':36s} hidden {c.get('hidden_size')}, {c.get('num_hidden_layers')} layers, "
              f"{c.get('num_attention_heads')}/{c.get('num_key_value_heads')} heads, vocab {c.get('vocab_size')}")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    stats = build_standin(args.config, args.dir, device=args.device, dtype=args.dtype, seed=args.seed,
                          shard_mb=args.shard_mb, force=args.force)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(stats), indent=2))
    print(f"use it with: tritonrl run --params qwen7b -p model={stats.path}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    label = standin_label(args.path)
    if label is None:
        print(f"{args.path}: not a tritonrl stand-in (no {MARKER}, no {CONFIG_KEY} in config.json)")
        return 1
    report = check_standin(args.path)
    print(f"{args.path}: {label}")
    print(f"{report['tensors']} tensors, tokenizer {report['tokenizer_tokens']} tokens for vocab_size "
          f"{report['vocab_size']}: " + ("matches its config" if report["ok"] else "; ".join(report["problems"][:10])))
    return 0 if report["ok"] else 1


__all__ = ["StandinSource", "StandinError", "BuildStats", "load_source", "build_tokenizer", "build_standin",
           "standin_dir", "standin_label", "check_standin", "available_configs", "LABEL", "SUFFIX", "SPEC_PREFIX"]
