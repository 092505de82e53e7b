"""Supervised fine-tuning: LoRA on the SFT examples, with TRL's SFTTrainer, resumable.

Read top to bottom, `train_sft` does:

1. finds the run's examples (`paths.sft_train`, written by 01_data) and a fingerprint of what
   determines the result (model and SFT settings, seed, data file, number of processes);
2. decides where to start: a finished checkpoint with the same fingerprint is kept (no retraining);
   otherwise the newest *complete* trainer checkpoint `checkpoints/sft/checkpoint-N` of the same
   fingerprint is resumed (optimizer, scheduler and RNG state come back with it); otherwise it starts
   from scratch and clears what an older, different run left;
3. loads the policy with `models.load_policy` (LoRA from the profile, optional 8/4-bit base and
   gradient checkpointing: one path for every model);
4. trains with TRL's SFTTrainer on the prompt/completion records, so the loss covers the
   completion only, through TRL's fused LM head (the 49k-vocabulary logits are never materialised);
5. writes the adapter and tokenizer to `paths.sft_checkpoint` with `models.save_checkpoint`, whose
   marker goes last, and returns (and prints) exactly where it is.

Speed: with `packing` (the default) TRL packs examples into rows of `max_seq_len` and flattens
each micro-batch into one padding-free row; `packed_attention` keeps the packed sequences apart
(a varlen flash kernel on the GPU, per-sequence SDPA on the CPU). Without packing, batches are
padded and grouped by length. docs/PERFORMANCE.md has the measurements.

Several GPUs: `accelerate launch --num_processes 2 -m tritonrl_lib.train.sft.train --params gpu`
(docs/MULTI_GPU.md). Only the main process writes the log, markers and the final adapter.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...core.config import ConfigError, RunConfig, load_config
from ...core.digests import file_sha256
from ...core.jsonio import DamagedFile, read_json, read_jsonl, write_json
from ...core.paths import RunPaths
from ...model import load as models
from ...model.answer_layout import laid_out
from ..trainer import SFTDataError, SpeedOptions, base_model_spec, build_trainer, fit_to_length
from ..trainer_checkpoints import (checkpoint_is_complete, checkpoint_step, latest_complete_checkpoint,
                                  trainer_checkpoints)
from .log import JsonlLogCallback, TimeBudget, last_eval_loss, last_session, spent_before, trim_sft_log

# Settings that change neither the trained weights nor the order of the data.
_NOT_IN_FINGERPRINT = ("save_steps", "save_total_limit", "logging_steps", "eval_steps")


@dataclass
class SFTResult:
    checkpoint: Path  # the adapter + tokenizer folder (models.load_policy(cfg, adapter=...))
    log: Path  # the jsonl training log
    status: str  # trained | resumed | already_done
    resumed_from_step: int | None = None
    global_step: int = 0
    max_steps: int = 0
    final_loss: float | None = None  # the last logged training loss
    train_loss: float | None = None  # the Trainer's mean loss over this session
    tokens_per_s: float | None = None  # real (unpadded) tokens per second, all processes together
    world_size: int = 1
    wall_s: float = 0.0
    n_examples: int = 0
    plan: str = ""  # how batches were built and attended, in words

    def summary(self) -> str:
        tps = f"{self.tokens_per_s:,.0f}" if self.tokens_per_s else "n/a"
        loss = f"{self.final_loss:.4f}" if self.final_loss is not None else "n/a"
        return (f"SFT {self.status}: world_size={self.world_size} steps={self.global_step}/{self.max_steps} "
                f"tokens/s={tps} final_loss={loss} wall={self.wall_s:.1f}s [{self.plan}] "
                f"checkpoint: {self.checkpoint}")


# --------------------------------------------------------------------------- data


def load_sft_dataset(paths: RunPaths, max_samples: int, seed: int, layout: str = "as_written"):
    """The run's SFT examples as a datasets.Dataset with TRL's `prompt`/`completion` columns: a seeded
    sample of at most `max_samples` rows (the data stage may order its file by family)."""
    return load_sft_datasets(paths, max_samples, seed, 0.0, layout)[0]


def load_sft_datasets(paths: RunPaths, max_samples: int, seed: int, eval_fraction: float = 0.0,
                      layout: str = "as_written"):
    """(training Dataset, held-out Dataset or None): with `eval_fraction` > 0 a seeded slice of the
    examples (at least one) is set aside first, so its loss measures examples never trained on;
    the training rows are then a seeded sample of at most `max_samples` of the rest. `layout`
    (`sft.answer_layout`) orders each data-stage answer's parts (model/answer_layout.py)."""
    from datasets import Dataset

    path = paths.sft_train
    if not path.is_file():
        raise SFTDataError(f"no SFT examples at {path}: run the data stage first "
                           "(notebooks/01_data.ipynb, or `tritonrl run --only 01_data` with the same profile and run)")
    try:
        records = read_jsonl(path)
    except DamagedFile as e:
        raise SFTDataError(f"{e} (01_data writes it)") from None
    rows = []
    for i, rec in enumerate(records, 1):
        problem = _record_problem(rec)
        if problem:
            raise SFTDataError(f"{path}, record {i}: {problem}; re-run 01_data")
        rows.append({"prompt": rec["prompt"], "completion": laid_out(rec, layout)})
    if not rows:
        raise SFTDataError(f"{path} holds no examples: re-run 01_data")
    held: list[dict[str, Any]] = []
    if eval_fraction > 0 and len(rows) >= 2:
        order = list(range(len(rows)))
        random.Random(f"{seed}:sft-eval").shuffle(order)
        n_eval = min(len(rows) - 1, max(1, math.ceil(eval_fraction * len(rows))))
        chosen = set(order[:n_eval])
        held = [rows[i] for i in sorted(chosen)]
        rows = [r for i, r in enumerate(rows) if i not in chosen]
    if max_samples and len(rows) > max_samples:
        rows = random.Random(seed).sample(rows, max_samples)
    return Dataset.from_list(rows), (Dataset.from_list(held) if held else None)


def _record_problem(rec: Any) -> str | None:
    if not isinstance(rec, dict) or "prompt" not in rec or "completion" not in rec:
        return "a record needs `prompt` and `completion` (TRL's conversational prompt/completion form)"
    for key, roles in (("prompt", ("system", "user")), ("completion", ("assistant",))):
        msgs = rec[key]
        if not isinstance(msgs, list) or not msgs or not all(
                isinstance(m, dict) and m.get("role") in roles and isinstance(m.get("content"), str) for m in msgs):
            return f"`{key}` must be a non-empty list of {{role, content}} messages with roles {'/'.join(roles)}"
    return None


def fingerprint(cfg: RunConfig, data_file: Path, world_size: int, max_steps: int | None = None) -> dict[str, Any]:
    """What the trained adapter depends on; a checkpoint is reused or resumed only when this matches."""
    sft = {k: v for k, v in dataclasses.asdict(cfg.sft).items() if k not in _NOT_IN_FINGERPRINT}
    if sft["answer_layout"] == "as_written":
        del sft["answer_layout"]  # the order adapters were trained on before the setting: they still match
    return {"model": dataclasses.asdict(cfg.model), "sft": sft, "seed": cfg.seed,
            "data_sha256": file_sha256(data_file), "world_size": world_size, "max_steps": max_steps}


def _same_result(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Fingerprints that train the same adapter; the process count matters only to resuming mid-run."""
    strip = lambda d: {k: v for k, v in d.items() if k != "world_size"}  # noqa: E731
    return a is not None and strip(a) == strip(b)


# --------------------------------------------------------------------------- processes


class _Processes:
    """Rank bookkeeping: a plain single process, or one of the DDP group that `accelerate launch`
    (or torchrun) started; the launcher's RANK / WORLD_SIZE say which."""

    def __init__(self, device: str):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.is_main = self.rank == 0
        self._state = None
        if self.world_size > 1:
            from accelerate import PartialState

            if device.startswith("cuda") and "LOCAL_RANK" in os.environ:
                import torch

                torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # "cuda" below means this rank's GPU

            # joins the process group (NCCL, or gloo on the CPU) and selects this rank's GPU, so the
            # policy loads onto it; the Trainer later reuses the same state
            self._state = PartialState(cpu=not device.startswith("cuda"))

    def wait(self) -> None:
        if self._state is not None:
            self._state.wait_for_everyone()


def train_sft(cfg: RunConfig, paths: RunPaths | None = None, *, speed: SpeedOptions | None = None,
              force: bool = False, max_steps: int | None = None,
              echo: Callable[[str], None] | None = None) -> SFTResult:
    """Train (or resume, or reuse) the run's SFT adapter; returns where it is and how it went.

    `force` retrains from scratch even over a finished checkpoint. `max_steps` caps the number of
    optimizer steps (benchmarks)."""
    import torch
    from transformers import set_seed

    t_start = time.perf_counter()
    procs = _Processes(models.resolve_device(cfg.device))

    def say(msg: str) -> None:
        if procs.is_main:
            (echo or (lambda s: print(s, flush=True)))(msg)

    paths = (paths or cfg.paths).ensure()
    out = paths.sft_checkpoint
    dataset, eval_dataset = load_sft_datasets(paths, cfg.sft.max_samples, cfg.seed, cfg.sft.eval_fraction,
                                              cfg.sft.answer_layout)
    fp = fingerprint(cfg, paths.sft_train, procs.world_size, max_steps)

    # 1. finished already? (with any number of processes: a 2-GPU adapter serves a 1-GPU notebook)
    marker = read_json(out / models.MARKER, None) if models.checkpoint_complete(out) else None
    if marker and _same_result(marker.get("fingerprint"), fp) and not force:
        say(f"SFT already finished: checkpoint at {out} (step {marker.get('global_step')}); "
            "nothing to retrain (force=True trains again)")
        return SFTResult(checkpoint=out, log=paths.sft_log, status="already_done",
                         global_step=marker.get("global_step", 0), max_steps=marker.get("global_step", 0),
                         final_loss=marker.get("final_loss"), train_loss=marker.get("train_loss"),
                         tokens_per_s=marker.get("tokens_per_s"), world_size=procs.world_size,
                         wall_s=time.perf_counter() - t_start, n_examples=len(dataset),
                         plan=marker.get("plan", ""))

    # 2. resume or start afresh
    state = read_json(paths.sft_run_state, None)
    resume = latest_complete_checkpoint(out) if (state and state.get("fingerprint") == fp and not force) else None
    resume_step = checkpoint_step(resume) if resume else 0
    if procs.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / models.MARKER).unlink(missing_ok=True)  # the adapter here is not this run's until saved again
        for step, folder in trainer_checkpoints(out):
            if resume is None or step > resume_step or not checkpoint_is_complete(folder):
                shutil.rmtree(folder, ignore_errors=True)  # half-written, or from a different run
        trim_sft_log(paths.sft_log, resume_step)
        session = last_session(paths.sft_log) + 1 if resume else 1
        write_json(paths.sft_run_state, {"fingerprint": fp, "session": session,
                                         "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    procs.wait()
    session = (read_json(paths.sft_run_state, None) or {}).get("session", 1)
    say(f"SFT: {len(dataset)} examples from {paths.sft_train} -> {out}")
    if resume:
        say(f"SFT: resuming from {resume} (step {resume_step})")
    elif state and state.get("fingerprint") != fp and not force:
        say(f"SFT: settings or data changed since the checkpoints in {out} were written; training from scratch")

    # 3. the policy: LoRA from the profile (8/4-bit base and gradient checkpointing included)
    if procs.world_size > 1:  # the main process fills the model cache (GGUF conversion, tiny build) alone
        if procs.is_main:
            models.resolve_model(cfg.model.model, cfg.seed)
        procs.wait()
    set_seed(cfg.seed)
    model, tokenizer = models.load_policy(cfg)
    dataset, fit = fit_to_length(dataset, tokenizer, cfg.sft.max_seq_len, completion_limit=cfg.rl.max_new_tokens)
    if eval_dataset is not None:
        eval_dataset, _ = fit_to_length(eval_dataset, tokenizer, cfg.sft.max_seq_len)
    if fit["dropped"] or fit["cut"]:
        say(f"SFT: of {fit['kept'] + fit['dropped']} examples, {fit['cut']} are longer than max_seq_len="
            f"{cfg.sft.max_seq_len} and are cut, {fit['dropped']} are dropped (the prompt alone fills it); "
            "raise max_seq_len to keep them whole")
    if fit["over_limit"]:
        say(f"SFT: {fit['over_limit']} of {fit['kept']} examples have a completion longer than rl.max_new_tokens="
            f"{cfg.rl.max_new_tokens} (the longest: {fit['longest_completion']} tokens): sampled at that limit, "
            "the policy cannot finish such a solution in RL or evaluation; raise max_new_tokens "
            f"(e.g. -p max_new_tokens={fit['longest_completion'] + 32})")
    logger = JsonlLogCallback(paths.sft_log, session) if procs.is_main else None
    budget = TimeBudget(cfg.sft.time_budget_s, spent_before(paths.sft_log, session)) \
        if cfg.sft.time_budget_s > 0 else None
    trainer, plan = build_trainer(cfg, dataset, model, tokenizer, out, speed=speed,
                                  callbacks=[c for c in (logger, budget) if c is not None], max_steps=max_steps,
                                  eval_dataset=eval_dataset)
    if budget is not None:
        plan += f"; at most {cfg.sft.time_budget_s:.0f} s of training ({budget.spent_before:.0f} s spent before)"
    say(f"SFT: {plan}")

    # 4. train
    with models.explain_oom("sft", cfg):
        result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    metrics = dict(result.metrics or {})
    records = logger.records if logger else []
    final_loss = next((r["loss"] for r in reversed(read_jsonl(paths.sft_log)) if r.get("loss") is not None), None)
    tokens_per_s = None
    if records and records[-1]["elapsed_s"] > 0:
        tokens_per_s = records[-1]["num_tokens"] / records[-1]["elapsed_s"]

    # 5. the adapter, its tokenizer and the marker (written last)
    out_result = SFTResult(
        checkpoint=out, log=paths.sft_log, status="resumed" if resume else "trained",
        resumed_from_step=resume_step if resume else None, global_step=trainer.state.global_step,
        max_steps=trainer.state.max_steps, final_loss=final_loss, train_loss=metrics.get("train_loss"),
        tokens_per_s=tokens_per_s, world_size=procs.world_size, n_examples=len(dataset), plan=plan)
    if trainer.is_world_process_zero():
        peft_model = trainer.accelerator.unwrap_model(trainer.model)
        models.save_checkpoint(peft_model, tokenizer, out, base_model=base_model_spec(cfg.model.model), extra={
            "stage": "sft", "fingerprint": fp, "global_step": out_result.global_step,
            "final_loss": final_loss, "train_loss": out_result.train_loss, "tokens_per_s": tokens_per_s,
            "plan": plan, "world_size": procs.world_size, "planned_steps": trainer.state.max_steps,
            "stopped_by_time_budget": bool(budget and budget.stopped), "eval_loss": last_eval_loss(paths.sft_log),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    procs.wait()
    out_result.wall_s = time.perf_counter() - t_start
    del trainer, model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    say(out_result.summary())
    return out_result


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonrl_lib.train.sft.train",
        description="LoRA SFT of the run's policy on its SFT examples (resumes after a kill). "
                    "Several GPUs: accelerate launch --num_processes N -m tritonrl_lib.train.sft.train ...")
    parser.add_argument("--params", default="auto", help="profile: cpu, gpu, gpu_long, qwen7b, smoke or a YAML file (auto)")
    parser.add_argument("--run", default=None, help="run name (folder under outputs/); default the profile's")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting, e.g. -p epochs=2 -p lora_r=32")
    parser.add_argument("--force", action="store_true", help="train again even over a finished checkpoint")
    parser.add_argument("--compile", action="store_true", default=None, help="torch.compile each decoder layer")
    parser.add_argument("--fused-kernels", action="store_true", default=None,
                        help="fused Triton RMSNorm and SwiGLU (CUDA)")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.params, overrides={"run": args.run} if args.run else None, cli=args.param)
        speed = SpeedOptions(compile=args.compile, fused_kernels=args.fused_kernels)
        result = train_sft(cfg, force=args.force, speed=speed)
    except (ConfigError, SFTDataError, models.ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if result.checkpoint else 1


if __name__ == "__main__":
    sys.exit(main())
