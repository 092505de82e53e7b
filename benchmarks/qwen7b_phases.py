"""The phases of benchmarks/qwen7b_standin.py: each measures one stage of the qwen7b profile on the
stand-in, through the project's own code, and returns its figures as a dict (see that script)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
BNB_WHEEL = "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"  # what the GPU machine needs carried


class Skip(Exception):
    """The phase cannot run here (no GPU, bitsandbytes missing): retried on the next run."""


class Ctx:
    """Paths and settings shared by the phases."""

    def __init__(self, args: argparse.Namespace, argv: list[str]):
        from tritonrl_lib.model import standin

        self.args, self.argv = args, argv
        self.work = Path(args.work).resolve()
        self.results = self.work / "results"
        self.logs = self.work / "logs"
        self.source = standin.load_source(args.config)
        self.model = self.work / "model" / standin.folder_name(self.source)

    @property
    def device(self) -> str:
        import torch

        return ("cuda" if torch.cuda.is_available() else "cpu") if self.args.device == "auto" else self.args.device

    def config(self, run: str, **overrides: Any):
        """The profile with the benchmark's settings, then `overrides` (bare setting names)."""
        from tritonrl_lib.core.config import load_config

        # no data stage here, so no split for the profile's rl_tasks=train: Level-2 tasks, the longest prompts,
        # as this benchmark's figures were measured (-p rl_tasks=... overrides)
        base = {"model": str(self.model), "outputs_dir": str(self.work / "outputs"), "run": run, "device": self.device,
                "save_steps": 10 ** 6, "rl_tasks": "level2"}
        cfg = load_config(self.args.params, overrides=base, cli=self.args.param)
        from tritonrl_lib.core.config import apply_overrides, validate

        apply_overrides(cfg, overrides, origin="benchmark")
        validate(cfg)
        return cfg


# --------------------------------------------------------------------------- measuring


def gpu_reset() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def gpu_peak() -> dict[str, float | None]:
    import torch

    if not torch.cuda.is_available():
        return {"peak_gpu_allocated_gb": None, "peak_gpu_reserved_gb": None}
    torch.cuda.synchronize()
    return {"peak_gpu_allocated_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "peak_gpu_reserved_gb": round(torch.cuda.max_memory_reserved() / 2**30, 2)}


def sft_adapter(ctx: Ctx) -> Path | None:
    from tritonrl_lib.model import load as models

    folder = ctx.config("sft-bf16").paths.sft_checkpoint
    return folder if models.checkpoint_complete(folder) else None


def ensure_sft_checkpoint(ctx: Ctx, cfg) -> str:
    """RL starts from an SFT adapter: sft_bf16's, or an untrained LoRA when that phase did not finish."""
    from tritonrl_lib.model import load as models

    dest = cfg.paths.ensure().sft_checkpoint
    src = sft_adapter(ctx)
    if src is not None:
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("checkpoint-*"))
        return f"the sft_bf16 adapter ({src})"
    if not models.checkpoint_complete(dest):
        model, tok = models.load_policy(cfg, trainable=True)
        models.save_checkpoint(model, tok, dest, base_model=cfg.model.model, extra={"stage": "sft", "untrained": True})
        del model
    return "an untrained LoRA (no sft_bf16 adapter on this machine: that phase ran in an earlier call or failed)"


@contextlib.contextmanager
def shared_training_sizes(ctx: Ctx, cfg):
    """RL's training sizes (rl.train_task_max_mb's measurements of every task the profile's rl_tasks selects)
    measured by the first RL phase and read back by the others: each phase has a run folder of its own, and
    measuring the same tasks again cost each one minutes (two of the three RL phases' walls, 450 s of 480 s
    each, on a loaded 2-core machine)."""
    shared, mine = ctx.work / "rl_train_sizes.json", cfg.paths.ensure().rl_train_sizes
    if shared.is_file() and not mine.is_file():
        shutil.copy2(shared, mine)
    try:
        yield
    finally:
        if mine.is_file():
            shutil.copy2(mine, shared)


def rl_tasks(cfg, n: int):
    from tritonrl_lib.train.rl.start import select_rl_tasks

    pool = select_rl_tasks(cfg)
    return [pool[i % len(pool)] for i in range(n)]


def steady_sft_rate(log: list[dict]) -> float | None:
    """Tokens per second from the first logged step to the last (the first step's warm-up excluded)."""
    recs = [r for r in log if r.get("num_tokens") is not None and r.get("elapsed_s") is not None]
    if len(recs) < 2 or recs[-1]["elapsed_s"] <= recs[0]["elapsed_s"]:
        return None
    return (recs[-1]["num_tokens"] - recs[0]["num_tokens"]) / (recs[-1]["elapsed_s"] - recs[0]["elapsed_s"])


# --------------------------------------------------------------------------- phases


def phase_env(ctx: Ctx) -> dict:
    import torch

    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "device": ctx.device, "cpus": os.cpu_count()}
    for mod in ("transformers", "peft", "trl", "accelerate", "datasets", "bitsandbytes", "triton"):
        try:
            out[mod] = importlib.import_module(mod).__version__
        except Exception as e:  # noqa: BLE001 - a missing or broken package is what we report
            out[mod] = f"missing ({type(e).__name__}: {str(e)[:120]})"
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1), gpus=torch.cuda.device_count())
    ctx.work.mkdir(parents=True, exist_ok=True)
    out["disk_free_gb"] = round(shutil.disk_usage(ctx.work).free / 2**30, 1)
    with open("/proc/meminfo") as f:
        out["host_memory_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    return out


def phase_build(ctx: Ctx) -> dict:
    from tritonrl_lib.model import standin

    stats_file = ctx.work / "build.json"
    if standin.is_complete(ctx.model):  # built by an earlier run whose result was lost
        return {"reused": True, **standin.read_marker(ctx.model)["build"], "check": standin.check_standin(ctx.model)}
    cmd = [sys.executable, "-m", "tritonrl_lib.cli", "standin", "build", ctx.args.config, "--dir",
           str(ctx.model.parent), "--device", ctx.device, "--json", str(stats_file)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"standin build failed ({proc.returncode}): {proc.stderr[-2000:]}")
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size = sum(f.stat().st_size for f in ctx.model.iterdir())
    return {**json.loads(stats_file.read_text()), "command_wall_s": round(wall, 1),
            "peak_rss_of_build_process_mb": round(peak_children, 1), "folder_gb": round(size / 2**30, 2),
            "check": standin.check_standin(ctx.model), "log_tail": proc.stdout[-600:]}


def phase_data(ctx: Ctx) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.rollout import task_prompts
    from tritonrl_lib.train.sft.synthetic import builtin_sft_records, write_records

    cfg = ctx.config("sft-bf16")
    tok = models.load_tokenizer(str(ctx.model))
    s = cfg.sft
    rows_needed = ctx.args.sft_steps * s.grad_accum_steps * s.per_device_batch_size
    n = max(32, int(rows_needed * s.max_seq_len / ((256 + s.max_seq_len) / 2) * 1.5))
    records = builtin_sft_records(n, tok, seed=cfg.seed, min_tokens=256, max_tokens=s.max_seq_len)
    for run in ("sft-bf16", "sft-8bit"):
        write_records(ctx.config(run).paths.ensure().sft_train, records)
    lengths = [len(tok(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                       add_special_tokens=False)["input_ids"]) for r in records]
    prompts = task_prompts(tok, rl_tasks(cfg, ctx.args.rl_tasks))
    plen = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    return {"sft_examples": n, "sft_mean_tokens": round(sum(lengths) / n, 1), "sft_max_tokens": max(lengths),
            "rl_prompt_mean_tokens": round(sum(plen) / len(plen), 1), "rl_prompt_max_tokens": max(plen),
            "tokenizer_tokens": len(tok)}


def require_8bit(cfg) -> None:
    """Skip (to be retried) where 8-bit loading cannot work, with the library's own message."""
    import torch

    from tritonrl_lib.model import load as models

    try:
        models._quantization_config(cfg.model, torch.bfloat16)
    except models.ModelLoadError as e:
        raise Skip(f"{e}. On the GPU machine, carry {BNB_WHEEL} and install it into /tmp/site "
                   "(docs/PERFORMANCE.md)") from None


def _sft(ctx: Ctx, run: str, eight_bit: bool) -> dict:
    from tritonrl_lib.model import load as models

    cfg = ctx.config(run, load_in_8bit=eight_bit, logging_steps=1)
    if eight_bit:
        require_8bit(cfg)
    if not cfg.paths.sft_train.is_file():
        raise Skip("no SFT data: the data phase has not run")
    from tritonrl_lib.train.sft.train import train_sft
    from tritonrl_lib.core.jsonio import read_jsonl

    gpu_reset()
    with models.explain_oom("sft", cfg):
        res = train_sft(cfg, force=True, max_steps=ctx.args.sft_steps)
    log = read_jsonl(cfg.paths.sft_log)
    return {"tokens_per_s_steady": round(steady_sft_rate(log) or 0, 1) or None,
            "tokens_per_s_session": round(res.tokens_per_s or 0, 1), "steps": res.global_step,
            "tokens_per_step": round(log[-1]["num_tokens"] / max(1, log[-1]["step"])) if log else None,
            "wall_s": round(res.wall_s, 1), "plan": res.plan, "load_in_8bit": eight_bit,
            "per_device_batch_size": cfg.sft.per_device_batch_size, "grad_accum_steps": cfg.sft.grad_accum_steps,
            "max_seq_len": cfg.sft.max_seq_len, "gradient_checkpointing": cfg.model.gradient_checkpointing,
            "step_log": [{k: r.get(k) for k in ("step", "num_tokens", "elapsed_s", "tokens_per_s")} for r in log],
            **gpu_peak()}


def phase_sft_bf16(ctx: Ctx) -> dict:
    return _sft(ctx, "sft-bf16", eight_bit=False)


def phase_sft_8bit(ctx: Ctx) -> dict:
    return _sft(ctx, "sft-8bit", eight_bit=True)


def _sample(sampler, prompts, sampling) -> dict:
    gpu_reset()
    res = sampler.generate(prompts, sampling)
    st = res.stats
    return {"engine": st.engine, "sequences": st.sequences, "batch_size": sampling.batch_size,
            "new_tokens": sampling.max_new_tokens, "generated_tokens": st.generated_tokens,
            "wall_s": round(st.wall_s, 2), "prefill_s": round(st.prefill_s, 2), "tokens_per_s": round(st.tokens_per_s, 1),
            "finish_reasons": st.finish_reasons, "cuda_graphs": st.cuda_graphs, **gpu_peak()}


def _lean_sampler(model, tok) -> tuple[Any, str]:
    """The lean engine. If its self-check refuses the stand-in, it is measured anyway (its speed does
    not depend on the weights' values) and the refusal is reported: RL would fall back to generate."""
    from tritonrl_lib.rollout import LeanDecoder, Rollout

    sampler = Rollout(model, tok, engine="auto")
    if sampler.engine_name == "lean":
        return sampler, sampler.note
    note = sampler.note
    sampler.lean, sampler.engine_name = LeanDecoder(model), "lean"
    return sampler, f"SELF-CHECK REFUSED, measured anyway; RL and eval would use generate: {note}"


def phase_rollout(ctx: Ctx) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.rollout import Rollout, SamplingConfig, task_prompts

    a = ctx.args
    cfg = ctx.config("rollout", load_in_8bit=False)
    adapter = sft_adapter(ctx)
    out: dict[str, Any] = {"policy": "the sft_bf16 adapter" if adapter else "a fresh LoRA (no SFT adapter yet)"}
    with models.explain_oom("rollout", cfg):
        model, tok = models.load_policy(cfg, adapter=adapter, trainable=True)  # as RL holds it
        prompts = task_prompts(tok, rl_tasks(cfg, a.rl_tasks))
        shape = SamplingConfig.from_config(cfg, n_samples=a.rl_samples, max_new_tokens=a.rl_new_tokens)
        sampler, out["lean_note"] = _lean_sampler(model, tok)
        t0 = time.perf_counter()
        sampler.generate(prompts[:1], dataclasses.replace(shape, n_samples=1, max_new_tokens=8))
        out["lean_warmup_s"] = round(time.perf_counter() - t0, 2)
        out["lean"] = _sample(sampler, prompts, shape)
        everything = len(prompts) * a.rl_samples
        out["lean_one_batch"] = _sample(sampler, prompts, dataclasses.replace(shape, batch_size=everything))
        sampler.release()
        del sampler
        free_gpu()
        hf = Rollout(model, tok, engine="hf")
        # one RL batch: rollout_batch_size sequences (the tasks' prompts, one sample each)
        one_batch = task_prompts(tok, rl_tasks(cfg, cfg.rl.rollout_batch_size))
        out["generate"] = _sample(hf, one_batch, dataclasses.replace(shape, n_samples=1, engine="hf"))
        out["generate"]["note"] = (f"one batch of {len(one_batch)} sequences; all {everything} would take "
                                   f"{everything / max(1, len(one_batch)):.0f}x as long")
    return out


def _timed_grpo() -> tuple[dict[str, float], dict[str, str]]:
    """GRPO's pieces with step timestamps: train_grpo builds GRPOPieces by name, so the subclass is
    put in its place for this process. If the lean engine's self-check refuses the stand-in, the
    engine is used anyway (as in the rollout phase), and the result says so."""
    import torch

    from tritonrl_lib.rollout import LeanDecoder, UnsupportedModel
    from tritonrl_lib.train.rl import grpo

    marks: dict[str, float] = {}
    info: dict[str, str] = {}

    def mark(name: str) -> Callable:
        def event(args, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            marks.setdefault(name, time.perf_counter())
        return event

    class TimedPieces(grpo.GRPOPieces):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.sampler.engine_name != "lean":
                try:
                    self.sampler.lean, self.sampler.engine_name = LeanDecoder(self.model), "lean"
                    info["lean"] = f"SELF-CHECK REFUSED, measured anyway: {self.sampler.note}"
                except UnsupportedModel as exc:
                    info["lean"] = f"not used: {exc}"

        def callback(self):
            cb = super().callback()
            for name in ("on_train_begin", "on_step_begin", "on_step_end", "on_train_end"):
                setattr(cb, name, mark(name[3:]))
            return cb

    grpo.GRPOPieces = TimedPieces
    return marks, info


def _grpo(ctx: Ctx, run: str, **overrides) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.train.rl.log import read_rl_log
    from tritonrl_lib.train.rl.best_of_n import reference_candidates
    from tritonrl_lib.train.rl.grpo import train_grpo

    cfg = ctx.config(run, method="grpo", grpo_steps=1, load_in_8bit=False, **overrides)
    start = ensure_sft_checkpoint(ctx, cfg)
    marks, info = _timed_grpo()
    gpu_reset()
    with models.explain_oom("grpo", cfg), shared_training_sizes(ctx, cfg):
        res = train_grpo(cfg, force=True, extra_candidates=reference_candidates)
    rec = read_rl_log(cfg.paths)[-1]
    end = marks.get("step_end", marks.get("train_end"))
    if end is None or "train_begin" not in marks:
        raise RuntimeError(f"the step's callback events did not fire (saw {sorted(marks)}): cannot time the step")
    step = end - marks["train_begin"]  # generation happens inside the step, before its forward passes
    gen, ver = rec["rollout"]["seconds"], rec["verify"]["seconds"]
    timing = rec.get("timing") or {}
    # verification overlaps generation (train/rl/groups.py): the step is not generate + verify + train;
    # train_s is the log's own figure, verify_wait_s the verification not hidden behind generation
    train = timing.get("train_s")
    ran = rec.get("injected", 0) + rec.get("ran_in_workers", 0)
    tokens = rec["rollout"]["tokens"]
    return {"start": start, "tasks": cfg.rl.tasks_per_round, "n_samples": cfg.rl.n_samples,
            "max_new_tokens": cfg.rl.max_new_tokens, "step_s": round(step, 2), "generate_s": gen, "verify_s": ver,
            "train_s": round(train, 2) if train is not None else None,
            "verify_wait_s": timing.get("verify_wait_s"), "rollout_engine": rec["rollout"]["engine"],
            "rollout_tokens": tokens, "rollout_tokens_per_s": rec["rollout"]["tokens_per_s"],
            "verified": rec["verify"]["candidates"], "ran_in_workers": ran,
            "verify_per_min_of_those_run": round(60 * ran / ver, 1) if ver > 0 and ran else None,
            "lean_note": info.get("lean", ""), "trl": {k: rec.get("trl", {}).get(k) for k in ("loss", "grad_norm")},
            "wall_s": round(res.wall_s, 1), **gpu_peak()}


def phase_grpo(ctx: Ctx) -> dict:
    a = ctx.args
    return _grpo(ctx, "grpo", tasks_per_round=a.rl_tasks, n_samples=a.rl_samples, max_new_tokens=a.rl_new_tokens)


def phase_grpo_profile(ctx: Ctx) -> dict:
    return _grpo(ctx, "grpo-profile", tasks_per_round=ctx.args.profile_tasks)


def phase_generate_8bit(ctx: Ctx) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.rollout import Rollout, SamplingConfig, task_prompts

    cfg = ctx.config("sft-8bit", load_in_8bit=True)
    require_8bit(cfg)
    with models.explain_oom("rollout", cfg):
        model, tok = models.load_policy(cfg, trainable=True)
        sampler = Rollout(model, tok, engine="auto")
        prompts = task_prompts(tok, rl_tasks(cfg, cfg.rl.rollout_batch_size))
        shape = SamplingConfig.from_config(cfg, n_samples=1, max_new_tokens=ctx.args.gen8_new_tokens)
        return {"engine_note": sampler.note, **_sample(sampler, prompts, shape)}


def phase_best_of_n(ctx: Ctx) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.train.rl.log import read_rl_log
    from tritonrl_lib.train.rl.best_of_n import reference_candidates, train_best_of_n

    cfg = ctx.config("best-of-n", method="best_of_n", rounds=1, tasks_per_round=ctx.args.bon_tasks,
                     load_in_8bit=False)
    start = ensure_sft_checkpoint(ctx, cfg)
    gpu_reset()
    with models.explain_oom("best_of_n", cfg), shared_training_sizes(ctx, cfg):
        res = train_best_of_n(cfg, force=True, extra_candidates=reference_candidates)
    rec = read_rl_log(cfg.paths)[-1]
    return {"start": start, "tasks": cfg.rl.tasks_per_round, "n_samples": cfg.rl.n_samples,
            "max_new_tokens": cfg.rl.max_new_tokens, "rollout_batch_size": cfg.rl.rollout_batch_size,
            "rollout": rec["rollout"], "verify": rec["verify"], "kept": rec.get("kept"), "train": rec.get("train"),
            "wall_s": round(res.wall_s, 1), **gpu_peak()}


def phase_eval(ctx: Ctx) -> dict:
    from tritonrl_lib.model import load as models
    from tritonrl_lib.eval.run import evaluate_model
    from tritonrl_lib.eval.heldout import load_eval_tasks

    cfg = ctx.config("eval", load_in_8bit=False)
    tasks = load_eval_tasks(cfg, source="builtin", num_tasks=ctx.args.eval_tasks)
    out = cfg.paths.ensure().eval_file("base")
    gpu_reset()
    with models.explain_oom("eval", cfg):
        st = evaluate_model(cfg, str(ctx.model), tasks, model_stage="base", out=out, force=True, progress=False)
    rec = st.record
    Path(ctx.args.out).mkdir(parents=True, exist_ok=True)
    shutil.copy(out, Path(ctx.args.out) / "eval_base.json")
    return {"tasks": len(tasks), "model_path": rec["model_path"],
            "labelled": "random-weights-standin" in rec["model_path"], "generation": rec["generation"],
            "verify_wall_s": rec.get("verify_wall_s"), "wall_s": rec.get("wall_s"), **gpu_peak()}
