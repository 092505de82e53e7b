"""Loading a policy: the embedded SmolLM2, the tiny test model, or any HF model id / local path.

One code path for all three, so what the tests exercise with the small models is what a user's
Qwen2.5-Coder-7B run does: resolve the spec to an HF folder, load (optionally 8/4-bit), attach
LoRA from the config, and hand back a tokenizer that always pads, on the left.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..core.config import ConfigError, ModelConfig, RunConfig
from ..core.config import gpu_available
from ..core.jsonio import read_json, write_json
from .cache import ModelLoadError
from .embedded import embedded_model_dir
from .standin import SPEC_PREFIX, standin_dir, standin_label
from .tiny import CHATML_TEMPLATE, tiny_model_dir

log = logging.getLogger(__name__)

MARKER = "tritonrl_model.json"  # written beside every adapter we save: names the base model

# --------------------------------------------------------------------------- one notice silenced

# Importing transformers imports peft, which imports bitsandbytes; on a CPU with AVX512-BF16 its CPU
# backend then tries the optional `kernels` package for a fused 4-bit kernel and, when that package
# is not installed, logs this warning once per process (once per notebook). Nothing here runs 4-bit
# matmuls on the CPU (4-bit needs CUDA: `load_in_4bit`), so the missing package costs nothing.
_BNB_CPU_LOGGER = "bitsandbytes.backends.cpu.ops"
_BNB_KERNELS_NOTICE = "Failed to load CPU gemm_4bit_forward from kernels-community"


class _MissingKernelsPackage(logging.Filter):
    """Drops bitsandbytes' notice that the optional `kernels` package is not installed; keeps every
    other record of that logger (including this notice when `kernels` is installed but fails)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_BNB_KERNELS_NOTICE):
            return True
        exc = record.args[0] if isinstance(record.args, tuple) and record.args else None
        return not (isinstance(exc, ModuleNotFoundError) and exc.name == "kernels")


def silence_missing_kernels_notice() -> None:
    """Install the filter above (idempotent). It must come before bitsandbytes is first imported:
    this module does it on import, and every notebook's `start` calls it first."""
    logger = logging.getLogger(_BNB_CPU_LOGGER)
    if not any(isinstance(f, _MissingKernelsPackage) for f in logger.filters):
        logger.addFilter(_MissingKernelsPackage())


silence_missing_kernels_notice()

# --------------------------------------------------------------------------- resolving specs


def resolve_model(spec: str, seed: int = 0) -> str:
    """`embedded` / `tiny` / a local folder / an HF id -> what from_pretrained takes."""
    if spec == "embedded":
        return str(embedded_model_dir())
    if spec == "tiny":
        return str(tiny_model_dir(seed))
    if spec.startswith(STANDIN_PREFIX):
        return _resolve_standin(spec)
    p = Path(spec).expanduser()
    if p.exists():
        if not (p / "config.json").is_file() and not (p / "adapter_config.json").is_file():
            raise ModelLoadError(f"{p} exists but holds no config.json or adapter_config.json: "
                                 "not a model or adapter folder")
        return str(p.resolve())
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ModelLoadError(f"model path {spec} does not exist")
    return spec  # an HF hub id; from_pretrained reports if the hub cannot be reached


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def adapter_base(path: str | Path) -> str:
    """The base model spec an adapter folder was trained from."""
    marker = Path(path) / MARKER
    if marker.is_file():
        return read_json(marker)["base_model"]
    cfg = json.loads((Path(path) / "adapter_config.json").read_text())
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise ModelLoadError(f"{path}: adapter without a recorded base model ({MARKER} missing)")
    return base


# --------------------------------------------------------------------------- loading


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if gpu_available() else "cpu"
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ModelLoadError("device=cuda but no CUDA GPU is visible; use device=cpu or the cpu profile")
    return device


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def load_tokenizer(spec: str, seed: int = 0):
    """A tokenizer with a pad token and left padding (what batched generation needs)."""
    from transformers import AutoTokenizer

    path = resolve_model(spec, seed)
    if is_adapter_dir(path) and not (Path(path) / "tokenizer_config.json").is_file():
        path = resolve_model(adapter_base(path), seed)
    tok = AutoTokenizer.from_pretrained(path)
    return prepare_tokenizer(tok)


def prepare_tokenizer(tok):
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if tok.pad_token is None:
        raise ModelLoadError("tokenizer has neither a pad, eos nor unk token to pad with")
    tok.padding_side = "left"
    if tok.chat_template is None:
        tok.chat_template = CHATML_TEMPLATE
    return tok


def _quantization_config(mc: ModelConfig, compute_dtype):
    if not (mc.load_in_8bit or mc.load_in_4bit):
        return None
    import torch

    if not torch.cuda.is_available():
        raise ModelLoadError("load_in_8bit / load_in_4bit need a CUDA GPU (bitsandbytes quantises on the GPU); "
                             "set load_in_8bit=false load_in_4bit=false to train on the CPU")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelLoadError("load_in_8bit / load_in_4bit need bitsandbytes: pip install bitsandbytes")
    from transformers import BitsAndBytesConfig

    if mc.load_in_8bit:
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute_dtype,
                              bnb_4bit_use_double_quant=True)


def load_base_model(mc: ModelConfig, device: str = "auto", seed: int = 0, spec: str | None = None):
    """The base causal LM of `spec` (default mc.model) on `device`, in mc.dtype, quantised if asked."""
    from transformers import AutoModelForCausalLM

    device = resolve_device(device)
    dtype = resolve_dtype(mc.dtype, device)
    path = resolve_model(spec or mc.model, seed)
    announce_standin(path)
    quant = _quantization_config(mc, dtype)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if mc.attn_implementation != "auto":
        kwargs["attn_implementation"] = mc.attn_implementation
    if quant is not None:
        kwargs["quantization_config"] = quant
        # Quantised weights are placed at load time, on this process's GPU (one per rank under DDP).
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
    try:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except OSError as e:
        raise ModelLoadError(f"could not load model {spec or mc.model!r} ({path}): {e}. "
                             "Pass a local folder, `embedded` or `tiny` when the hub is unreachable.") from None
    if quant is None:
        model.to(device)
    return model


def attach_lora(model, mc: ModelConfig):
    """Wrap `model` with a fresh LoRA adapter on mc.lora_target_modules (those the model has)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [m for m in mc.lora_target_modules if m in present]
    if not targets:
        linear = sorted({n.rsplit(".", 1)[-1] for n, mod in model.named_modules()
                         if mod.__class__.__name__ in ("Linear", "Linear8bitLt", "Linear4bit")})
        raise ConfigError(f"none of lora_target_modules={mc.lora_target_modules} exist in this model; "
                          f"its linear layers are: {', '.join(linear)}")
    if mc.load_in_8bit or mc.load_in_4bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=mc.gradient_checkpointing)
    elif mc.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = LoraConfig(r=mc.lora_r, lora_alpha=mc.lora_alpha, lora_dropout=mc.lora_dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def load_policy(cfg: RunConfig, adapter: str | Path | None = None, trainable: bool = True,
                spec: str | None = None):
    """(model, tokenizer) for training or generation.

    `spec` (default cfg.model.model) may be `embedded`, `tiny`, an HF id, a model folder, or an
    adapter folder we saved (its base is read from the folder). With `adapter`, that adapter is
    loaded onto the base (trainable or frozen); otherwise a fresh LoRA from the config is attached
    when `trainable`, and the bare base is returned when not.
    """
    from peft import PeftModel

    mc = cfg.model
    spec = spec or mc.model
    if adapter is None and spec not in ("embedded", "tiny") and Path(spec).exists() and is_adapter_dir(spec):
        adapter = spec
    if adapter is not None:
        adapter = Path(adapter)
        if not is_adapter_dir(adapter):
            raise ModelLoadError(f"no adapter at {adapter} (adapter_config.json missing); "
                                 "train that stage first or pass another --model")
        base_spec = adapter_base(adapter)
        with explain_oom("load", cfg):  # the weights alone do not fit
            model = load_base_model(mc, cfg.device, cfg.seed, spec=base_spec)
            model = PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable)
        tok_src = adapter if (adapter / "tokenizer_config.json").is_file() else base_spec
        tok = load_tokenizer(str(tok_src), cfg.seed)
    else:
        with explain_oom("load", cfg):
            model = load_base_model(mc, cfg.device, cfg.seed, spec=spec)
        tok = load_tokenizer(spec, cfg.seed)
        if trainable:
            with explain_oom("load", cfg):
                model = attach_lora(model, mc)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tok.pad_token_id
    if not trainable:
        model.eval()
    return model, tok


def save_checkpoint(model, tokenizer, path: str | Path, base_model: str, extra: dict | None = None) -> Path:
    """Save an adapter (or full model) and its tokenizer into `path`, plus a marker naming the base.

    Files are written to a temp folder and moved in one by one; the marker is removed first and
    written last, so a kill mid-save leaves a folder `checkpoint_complete` calls incomplete, never
    one that looks good and is not. Other content of `path` (e.g. a trainer's checkpoint-N/
    folders) is left alone.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".saving-", dir=path))
    try:
        model.save_pretrained(tmp, **_active_adapters_only(model))
        tokenizer.save_pretrained(tmp)
        # PEFT's and TRL's cards name the base by its cache path or as [None]; say what this is
        (tmp / "README.md").write_text(model_card(base_model, extra or {}), encoding="utf-8")
        (path / MARKER).unlink(missing_ok=True)
        for f in tmp.iterdir():
            if f.is_dir() and (path / f.name).is_dir():  # os.replace moves a folder only onto none or an empty one
                shutil.rmtree(path / f.name)
            os.replace(f, path / f.name)
        marker = {"base_model": base_model, **(extra or {})}
        write_json(tmp / MARKER, marker)
        os.replace(tmp / MARKER, path / MARKER)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _active_adapters_only(model) -> dict[str, Any]:
    """save_pretrained's arguments that keep a PeftModel's inactive adapters out of the folder: GRPO with a
    KL term (grpo_beta > 0) holds TRL's frozen copy of the start adapter beside the policy's, as `ref`,
    which PEFT would save in a subfolder that loading never reads."""
    configs = getattr(model, "peft_config", None)
    active = getattr(model, "active_adapters", None)
    if not isinstance(configs, dict) or len(configs) < 2 or not active:
        return {}
    return {"selected_adapters": list(active)}


_BASE_WORDS = {"embedded": "SmolLM2-135M-Instruct (tritonrl's embedded copy)",
               "tiny": "tritonrl's tiny randomly initialised test model"}


def model_card(base_model: str, extra: dict) -> str:
    """The README.md of a saved adapter: what it is, what it was trained from, how to load it."""
    hub_id = base_model not in _BASE_WORDS and not Path(base_model).expanduser().exists() \
        and base_model.count("/") == 1
    base = _BASE_WORDS.get(base_model, f"`{base_model}`")
    stage = {"sft": "supervised fine-tuning (SFT)", "rl": "reinforcement learning (RL) after SFT"}.get(
        str(extra.get("stage", "")), "tritonrl training")
    method = f", method {extra['method']}" if extra.get("method") else ""
    front = "---\nlibrary_name: peft\n" + (f"base_model: {base_model}\n" if hub_id else "") + \
        "tags:\n- tritonrl\n- lora\n- triton\n---\n\n"
    return (front + f"# tritonrl LoRA adapter ({extra.get('stage', 'adapter')})\n\n"
            f"A LoRA adapter that teaches {base} to rewrite PyTorch modules as Triton GPU kernels, trained by "
            f"tritonrl with {stage}{method}.\n\n"
            f"- Base model: {base}\n"
            f"- Training record: `{MARKER}` beside this file (settings, steps, final loss)\n\n"
            "Load it with tritonrl, which finds the base model by itself: "
            "`tritonrl eval --model <this folder>`, or in Python "
            "`tritonrl_lib.model.load.load_policy(cfg, adapter=<this folder>)`.\n")


def checkpoint_complete(path: str | Path) -> bool:
    """A checkpoint folder whose save finished (its marker is written last)."""
    return (Path(path) / MARKER).is_file() and (is_adapter_dir(path) or (Path(path) / "config.json").is_file())


# --------------------------------------------------------------------------- random-weight stand-ins

STANDIN_PREFIX = SPEC_PREFIX  # `standin:<name>`: a random-weight stand-in built into the cache (standin.py)


def _resolve_standin(spec: str) -> str:
    return str(standin_dir(spec))


def announce_standin(path: str | Path) -> str | None:
    """Log, each time one is loaded, that `path` is a random-weight stand-in; its label, or None."""
    label = standin_label(path) if Path(path).is_dir() else None
    if label:
        log.warning("model %s: %s", path, label)
    return label


# --------------------------------------------------------------------------- GPU memory


class GPUMemoryError(RuntimeError):
    """A stage ran out of GPU memory; the message names the setting to change."""


def _setting_advice(cfg: RunConfig | None) -> dict[str, str]:
    def s(dotted: str) -> str:  # the setting's current value, when known
        return "" if cfg is None else f" (now {_dig(cfg, dotted)})"

    sft = (f"lower per_device_batch_size{s('sft.per_device_batch_size')} and raise grad_accum_steps to keep the "
           f"effective batch, or lower max_seq_len{s('sft.max_seq_len')}, or set gradient_checkpointing=true"
           f"{s('model.gradient_checkpointing')}")
    sampling = (f"lower rollout_batch_size{s('rl.rollout_batch_size')} (sequences decoded at once; the KV cache "
                f"grows with it) or max_new_tokens{s('rl.max_new_tokens')}")
    return {
        "load": "the weights alone do not fit: set load_in_8bit=true or load_in_4bit=true, or use a larger GPU",
        "sft": sft,
        "rollout": sampling,
        "eval": sampling,
        "grpo": (f"GRPO trains one group of n_samples{s('rl.n_samples')} completions of up to max_new_tokens"
                 f"{s('rl.max_new_tokens')} per micro-batch: lower n_samples or max_new_tokens; sampling: {sampling}"),
        "best_of_n": f"sampling: {sampling}; its fine-tune: {sft}",
    }


def _dig(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def is_out_of_memory(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc)
    return "out of memory" in text.lower() or "CUBLAS_STATUS_ALLOC_FAILED" in text


def out_of_memory_message(stage: str, cfg: RunConfig | None = None, exc: BaseException | None = None) -> str:
    """What to change when `stage` (load, sft, rollout, eval, grpo, best_of_n) runs out of GPU memory."""
    advice = _setting_advice(cfg).get(stage, "lower the batch size or the sequence length of this stage")
    where = ""
    try:
        import torch

        if torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info()
            where = f" on a GPU of {total / 2**30:.0f} GiB ({free / 2**30:.1f} GiB free now)"
    except Exception:
        pass
    first = str(exc).splitlines()[0][:300] if exc is not None else ""
    return f"{stage} ran out of GPU memory{where}: {advice}. (-p key=value sets one.){' [' + first + ']' if first else ''}"


@contextlib.contextmanager
def explain_oom(stage: str, cfg: RunConfig | None = None):
    """Re-raise running out of GPU memory inside the block as GPUMemoryError naming the setting to change.
    Nested blocks: the innermost names the setting (an outer one passes its GPUMemoryError on)."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, GPUMemoryError) or not is_out_of_memory(exc):
            raise
        raise GPUMemoryError(out_of_memory_message(stage, cfg, exc)) from exc
