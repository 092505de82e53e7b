"""What every fine-tune of the policy shares: SFT (`sft/train.py`) and best-of-N's rounds build one
TRL SFTTrainer the same way (`build_trainer`: packing, packed attention, LoRA input casts, fused
kernels, compiled layers), GRPO takes the same run arguments (`trainer_run_args`: seeds, precision,
device, checkpoints that hold what resuming needs), and all of them check their examples fit the
context (`fit_to_length`) and name an adapter's base the same way (`base_model_spec`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..core.config import ConfigError, RunConfig
from ..model import load as models
from .sft import packed_attention


class SFTDataError(FileNotFoundError):
    """The run has no usable SFT examples; the message names the data stage to run."""


@dataclass
class SpeedOptions:
    """How to run SFT fast. None of these changes the loss an example contributes (tests and the
    benchmark check it); packing changes only how examples are grouped into steps.

    packing: None = cfg.sft.packing. Pack examples into rows of max_seq_len, padding-free.
    attention: for packed rows: auto (varlen flash kernel on a GPU when it passes its self-check,
        else per-sequence SDPA), varlen, loop (per-sequence SDPA), native (transformers' own
        implementation: block-diagonal mask under sdpa; right for flash_attention_2).
    compile: torch.compile each decoder layer (dynamic shapes).
    group_by_length: without packing, batch examples of similar length (less padding).
    lora_input_cast: PEFT casts every LoRA input to the adapter's fp32 before autocast casts it back
        to bf16 for the matmul: two wasted passes over the activations per LoRA module. None = skip
        it when training under bf16/fp16 autocast (the matmul precision is the same), keep it otherwise.
    fused_kernels: RMSNorm and the SwiGLU gate as one Triton kernel each way (`fused_ops`; CUDA).
    None for compile / fused_kernels = the config's `sft.torch_compile` / `sft.fused_kernels` when the
    config has them, else off.
    """

    packing: bool | None = None
    attention: str = "auto"
    compile: bool | None = None
    group_by_length: bool = True
    lora_input_cast: bool | None = None
    fused_kernels: bool | None = None


def fit_to_length(dataset, tokenizer, max_len: int, completion_limit: int | None = None
                  ) -> tuple[Any, dict[str, int]]:
    """Drop examples whose prompt alone fills `max_len` tokens (nothing would be left to learn) and
    count those whose completion gets cut. With `completion_limit` (RL's and evaluation's
    max_new_tokens) also count the kept examples whose completion is longer than that: a policy
    that learns them can never finish one when it samples. Returns (dataset, {"dropped", "cut",
    "kept", "over_limit", "longest_completion"})."""

    def n_tokens(messages: list[dict], gen: bool) -> int:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    keep, cut, over, longest = [], 0, 0, 0
    for i, row in enumerate(dataset):
        prompt_len = n_tokens(row["prompt"], True)
        if prompt_len >= max_len - 8:
            continue
        keep.append(i)
        total = n_tokens(row["prompt"] + row["completion"], False)
        cut += total > max_len
        completion_len = total - prompt_len
        longest = max(longest, completion_len)
        over += completion_limit is not None and completion_len > completion_limit
    stats = {"dropped": len(dataset) - len(keep), "cut": cut, "kept": len(keep), "over_limit": int(over),
             "longest_completion": longest}
    if not keep:
        raise SFTDataError(f"every example's prompt fills max_seq_len={max_len} tokens, leaving no completion "
                           "to learn from: raise max_seq_len (e.g. -p max_seq_len=2048)")
    return (dataset.select(keep) if stats["dropped"] else dataset), stats


# --------------------------------------------------------------------------- the trainer


def trainer_run_args(cfg: RunConfig, device: str) -> dict[str, Any]:
    """The Trainer settings every stage shares: seeds, precision and device from the model's
    settings, checkpoints that hold what resuming needs, logging by steps, no reporting services."""
    import torch

    m = cfg.model
    dtype = models.resolve_dtype(m.dtype, device)
    on_gpu = device.startswith("cuda")
    return dict(
        logging_strategy="steps",
        save_strategy="steps",
        save_only_model=False,  # optimizer, scheduler and RNG state: what resuming needs
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=on_gpu and dtype == torch.bfloat16,
        fp16=on_gpu and dtype == torch.float16,
        use_cpu=not on_gpu,
        gradient_checkpointing=m.gradient_checkpointing,  # TRL's default is on; model/load.py decides
        gradient_checkpointing_kwargs={"use_reentrant": False} if m.gradient_checkpointing else None,
        report_to="none",
        disable_tqdm=False,
        dataloader_pin_memory=on_gpu,
    )


def _sft_config_kwargs(cfg: RunConfig, output_dir: Path, packing: bool, group_by_length: bool,
                       max_steps: int | None, device: str, evaluate: bool = False) -> dict[str, Any]:
    from trl import SFTConfig

    s = cfg.sft
    fields = {f.name for f in dataclasses.fields(SFTConfig)}
    kw: dict[str, Any] = dict(
        **trainer_run_args(cfg, device),
        output_dir=str(output_dir),
        num_train_epochs=float(s.epochs),
        max_steps=max_steps if max_steps else -1,
        per_device_train_batch_size=s.per_device_batch_size,
        gradient_accumulation_steps=s.grad_accum_steps,
        learning_rate=s.learning_rate,
        logging_steps=s.logging_steps,
        save_steps=s.save_steps,
        save_total_limit=s.save_total_limit,
        max_length=s.max_seq_len,
        packing=packing,
        packing_strategy="bfd",
        completion_only_loss=True,
        ddp_find_unused_parameters=False,  # every LoRA weight gets a gradient every step
    )
    if evaluate:
        # eval_steps below 1 is a fraction of the run's steps: 0.1 evaluates ten times
        kw.update(eval_strategy="steps", eval_steps=s.eval_steps or 0.1,
                  per_device_eval_batch_size=s.per_device_batch_size)
    # transformers 5 spells the warmup ratio as a fractional warmup_steps; older releases had warmup_ratio
    kw["warmup_ratio" if "warmup_ratio" in fields else "warmup_steps"] = float(s.warmup_ratio)
    if group_by_length and not packing:
        if "train_sampling_strategy" in fields:
            kw["train_sampling_strategy"] = "group_by_length"
        elif "group_by_length" in fields:
            kw["group_by_length"] = True
    return {k: v for k, v in kw.items() if k in fields}


def _compile_layers(model) -> int:
    """torch.compile every decoder layer in place (parameter names unchanged, so checkpoints are too)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = getattr(getattr(base, "model", base), "layers", None)
    if layers is None:
        raise ValueError(f"compile: no decoder layers found in {type(base).__name__}")
    for layer in layers:
        layer.compile(dynamic=True)
    return len(layers)


class _NoLoraInputCastWhileTraining(TrainerCallback):
    """Skips PEFT's fp32 cast of LoRA inputs only between train begin and end, where autocast makes
    it pointless; outside (generation with the same model, as RL does) the cast is needed."""

    def __init__(self, model):
        self.model = model

    def on_train_begin(self, args, state, control, **kwargs):
        _set_lora_input_cast(self.model, False)

    def on_train_end(self, args, state, control, **kwargs):
        _set_lora_input_cast(self.model, True)


def _setting(explicit: bool | None, cfg: RunConfig, name: str) -> bool:
    """An explicit SpeedOptions choice, else the config's sft.<name> when this config has it, else off."""
    return getattr(cfg.sft, name) if explicit is None else explicit


def _set_lora_input_cast(model, enabled: bool) -> int:
    """Turn PEFT's cast of LoRA inputs to the adapter dtype on or off; returns how many layers."""
    n = 0
    for module in model.modules():
        if hasattr(module, "cast_input_dtype_enabled") and hasattr(module, "lora_A"):
            module.cast_input_dtype_enabled = enabled
            n += 1
    return n


def build_trainer(cfg: RunConfig, dataset, model, tokenizer, output_dir: Path,
                  speed: SpeedOptions | None = None, callbacks: list | None = None,
                  max_steps: int | None = None, eval_dataset=None):
    """(SFTTrainer, plan): the trainer for `model` on `dataset` (and its loss on `eval_dataset`,
    when given, evaluated along the way), and a few words on how it batches."""
    from trl import SFTConfig, SFTTrainer

    speed = speed or SpeedOptions()
    packing = cfg.sft.packing if speed.packing is None else speed.packing
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = str(base.device)
    plan = []
    if packing:
        attention = speed.attention
        if attention == "auto":
            if base.config._attn_implementation in ("flash_attention_2", "flash_attention_3"):
                attention = "native"  # flash-attention reads the packed boundaries itself
            else:
                import torch

                dev = torch.device(device)
                attention, why = packed_attention.select_backend(dev.type, dev.index, base.dtype)
                plan.append(why)
        if attention in packed_attention.BACKENDS:
            packed_attention.use_packed_attention(model, attention)
            plan.insert(0, f"packed rows of {cfg.sft.max_seq_len}, {attention} attention")
        elif attention == "native":
            plan.insert(0, f"packed rows of {cfg.sft.max_seq_len}, {base.config._attn_implementation} attention")
        else:
            raise ConfigError(f"unknown attention {attention!r}: use auto, varlen, loop or native")
    else:
        plan.append(f"padded batches{', grouped by length' if speed.group_by_length else ''}, "
                    f"{base.config._attn_implementation} attention")
    args = SFTConfig(**_sft_config_kwargs(cfg, output_dir, packing, speed.group_by_length, max_steps, device,
                                          evaluate=eval_dataset is not None))
    autocast = args.bf16 or args.fp16
    cast = (not autocast) if speed.lora_input_cast is None else speed.lora_input_cast
    extra_callbacks = []
    if not cast:
        if not autocast:
            raise ConfigError("lora_input_cast=False needs bf16/fp16 autocast (a GPU run in bf16 or fp16)")
        n_lora = _set_lora_input_cast(model, True)
        extra_callbacks.append(_NoLoraInputCastWhileTraining(model))
        plan.append(f"LoRA inputs left in {base.dtype} while training ({n_lora} modules)")
    if _setting(speed.fused_kernels, cfg, "fused_kernels"):
        if not device.startswith("cuda") and os.environ.get("TRITON_INTERPRET") != "1":
            raise ConfigError("fused_kernels needs a CUDA GPU (or TRITON_INTERPRET=1, for tests)")
        from .sft.fused_ops import fuse_model  # deferred: imports triton, needed only with fused_kernels

        fused = fuse_model(model)
        plan.append(f"fused Triton RMSNorm x{fused['rms_norm']}, SwiGLU x{fused['swiglu']}")
    if _setting(speed.compile, cfg, "torch_compile"):
        plan.append(f"{_compile_layers(model)} decoder layers compiled")
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, eval_dataset=eval_dataset,
                         processing_class=tokenizer, callbacks=[*(callbacks or []), *extra_callbacks])
    if eval_dataset is not None:
        plan.append(f"loss on {len(eval_dataset)} held-out examples every "
                    f"{cfg.sft.eval_steps or '1/10 of the'} steps")
    return trainer, "; ".join(plan)


def completion_nll(trainer, max_rows: int | None = None) -> tuple[float, int]:
    """(summed negative log-likelihood, number of completion tokens) of the trainer's prepared data,
    in order, batched and attended exactly as training does it (no gradient, no update). Two ways
    of batching the same examples must give the same numbers; tests and the benchmark check that."""
    import torch

    model, data = trainer.model, trainer.train_dataset
    rows = [data[i] for i in range(len(data) if max_rows is None else min(max_rows, len(data)))]
    bs = trainer.args.per_device_train_batch_size
    device = trainer.args.device
    use_amp = device.type == "cuda" and (trainer.args.bf16 or trainer.args.fp16)
    amp_dtype = torch.bfloat16 if trainer.args.bf16 else torch.float16
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype, enabled=use_amp):
            for i in range(0, len(rows), bs):
                batch = trainer.data_collator(rows[i:i + bs])
                batch = {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}
                out = model(**batch, fused_lm_head=True)
                total -= out.log_probs.float().sum().item()
                count += int(out.label_mask.sum().item())
    finally:
        model.train(was_training)
    return total, count


# --------------------------------------------------------------------------- the entry


def base_model_spec(spec: str) -> str:
    """The base model an adapter trained from `spec` names: a local adapter's own base, a local
    model folder's absolute path, or the spec itself (a hub id, `embedded`, `tiny`)."""
    p = Path(spec).expanduser()
    if spec not in ("embedded", "tiny") and p.exists():
        return models.adapter_base(p) if models.is_adapter_dir(p) else str(p.resolve())
    return spec
