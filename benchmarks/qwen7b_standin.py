"""The `qwen7b` profile on a random-weight stand-in of Qwen2.5-Coder-7B-Instruct, on one GPU.

    # the GPU machine (one H100 or H200): resumable, stops starting phases near --budget-s; run it
    # again to go on. Results are copied to --out after every phase.
    python3 benchmarks/qwen7b_standin.py --work /tmp/q7 --out $OUT
    # every code path on the CPU with a tiny Qwen2 stand-in (tests/test_qwen7b_benchmark.py)
    python benchmarks/qwen7b_standin.py --work /tmp/q7 --out /tmp/q7/out --quick

Phases, in this order, each in a process of its own (a clean peak-memory figure each; one that
fails or runs out of memory does not stop the others). Every stage is the project's own code
(`train_sft`, `Rollout`, `train_grpo`, `train_best_of_n`, `evaluate_model`) on the stand-in, with
the profile's settings unless said otherwise:

  env            versions, GPU, disk
  build          `tritonrl standin build` (a child process): its time and peak host and GPU memory
  data           SFT examples: the built-in tasks' prompts and solutions cut to 256..max_seq_len tokens
  sft_bf16       train_sft, base in bf16, --sft-steps optimizer steps: tokens/s after the first step
  rollout        RL's shape (--rl-tasks x --rl-samples, --rl-new-tokens): the lean engine at the profile's
                 rollout_batch_size and with every sequence in one batch; model.generate on one batch
  grpo           one GRPO step at RL's shape, bf16 base, each group's first sample the task's reference
                 solution (so verification does real work): the step split into generate / verify / train
  sft_8bit       train_sft with the base in 8-bit (bitsandbytes), as the profile says
  generate_8bit  model.generate with the 8-bit base (the lean engine needs float weights)
  best_of_n      one best-of-N round at the profile's sampling (--bon-tasks tasks) and its fine-tune
  grpo_profile   one GRPO step at the profile's n_samples and max_new_tokens (--profile-tasks tasks):
                 the memory of its training micro-batch
  eval           evaluate_model on --eval-tasks built-in tasks, greedy, the profile's lengths
  (summary)      results.json, summary.md, the cost arithmetic (benchmarks/qwen7b_cost.py)

A phase that ends `ok` or `failed` is not run again (--retry-failed runs failed ones); `skipped`
(bitsandbytes missing, say) and `timeout` ones are. The stand-in writes random tokens: every
sequence runs to its token limit, which fixes the shapes; its completions, rewards and losses mean
nothing. On the GPU machine bitsandbytes has to be carried as a wheel (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import qwen7b_phases as phases  # noqa: E402
from qwen7b_phases import Ctx  # noqa: E402

PHASES = ["env", "build", "data", "sft_bf16", "rollout", "grpo", "sft_8bit", "generate_8bit", "best_of_n",
          "grpo_profile", "eval"]
# seconds each needs on one H100 (estimates, process start and model load included): a phase starts
# only when this much of the budget is left
ESTIMATE_S = {"env": 15, "build": 150, "data": 40, "sft_bf16": 120, "rollout": 170, "grpo": 240, "sft_8bit": 150,
              "generate_8bit": 110, "best_of_n": 130, "grpo_profile": 130, "eval": 100}
OOM_STAGE = {"sft_bf16": "sft", "sft_8bit": "sft", "rollout": "rollout", "generate_8bit": "rollout", "grpo": "grpo",
             "grpo_profile": "grpo", "best_of_n": "best_of_n", "eval": "eval"}
QUICK = {"rl_tasks": 2, "rl_samples": 2, "rl_new_tokens": 12, "sft_steps": 3, "bon_tasks": 1, "profile_tasks": 1,
         "eval_tasks": 2, "gen8_new_tokens": 8,
         "params": ["max_new_tokens=16", "rollout_batch_size=4", "max_seq_len=512", "grad_accum_steps=1",
                    "dtype=float32", "task_size=small", "workers=2", "n_samples=2", "top_k=1",
                    # two Level-2 tasks, not all 123: the profile's training-size cap measures every task RL may
                    # draw, 270 s of the quick run's 400 on a 2-core machine
                    "rl_tasks=builtin/L2/gemm_bias_relu,builtin/L2/conv1d_gelu"]}

# --------------------------------------------------------------------------- settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="state between runs: the stand-in, run folders, phase results")
    p.add_argument("--out", required=True, help="results are copied here after every phase ($OUT)")
    p.add_argument("--config", default="qwen2.5-coder-7b-instruct", help="stand-in config (tritonrl standin list)")
    p.add_argument("--params", default="qwen7b", help="the profile whose settings the stages use")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    p.add_argument("--device", default="auto", help="auto (cuda if any) | cuda | cpu")
    p.add_argument("--budget-s", type=float, default=520, help="start no phase that would end past this (seconds)")
    p.add_argument("--phases", default="", help="comma-separated subset of: " + ", ".join(PHASES))
    p.add_argument("--retry-failed", action="store_true")
    p.add_argument("--resume", default="", metavar="RESULTS_JSON",
                   help="an earlier call's results.json (from --out): its finished phases are kept, so a fresh "
                        "machine goes on where the last one stopped (the stand-in is built again there)")
    p.add_argument("--quick", action="store_true", help="tiny shapes and the tiny Qwen2 stand-in: the CPU check")
    p.add_argument("--rl-tasks", type=int, default=16)
    p.add_argument("--rl-samples", type=int, default=10)
    p.add_argument("--rl-new-tokens", type=int, default=768)
    p.add_argument("--sft-steps", type=int, default=4, help="optimizer steps per SFT phase (the first is warm-up)")
    p.add_argument("--bon-tasks", type=int, default=2)
    p.add_argument("--profile-tasks", type=int, default=2)
    p.add_argument("--eval-tasks", type=int, default=20)
    p.add_argument("--gen8-new-tokens", type=int, default=256)
    p.add_argument("--sft-tokens-per-example", type=float, default=None, help="for the cost (default: docs' 906)")
    p.add_argument("--phase", default="", help=argparse.SUPPRESS)  # internal: run one phase in this process
    args = p.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if key == "params":
                args.param = value + args.param
            elif getattr(args, key) == p.get_default(key):
                setattr(args, key, value)
        if args.config == p.get_default("config"):
            args.config = str(ROOT / "tests" / "fixtures" / "standin" / "qwen2-tiny.json")
    unknown = [x for x in args.phases.split(",") if x and x not in PHASES]
    if unknown:
        p.error(f"unknown phases {unknown}; choose from {', '.join(PHASES)}")
    return args


# --------------------------------------------------------------------------- summary and cost


def cost(ctx: Ctx, results: dict[str, dict]) -> dict | None:
    """The qwen7b run's GPU-hours from the measured rates (None until SFT and rollout are measured)."""
    from qwen7b_cost import SFT_TOKENS_PER_EXAMPLE, Rates, Workload, cost_table

    from tritonrl_lib.core.config import load_config

    ok = {k: v["result"] for k, v in results.items() if v.get("status") == "ok"}
    if "sft_bf16" not in ok or "rollout" not in ok:
        return None
    profile = load_config(ctx.args.params)  # the run as the profile has it, not the benchmark's cut-down shapes
    prompt = ok.get("data", {}).get("rl_prompt_mean_tokens", 600.0)
    per_example = ctx.args.sft_tokens_per_example or SFT_TOKENS_PER_EXAMPLE
    workload = Workload.from_config(profile, prompt_tokens=prompt, sft_tokens_per_example=per_example)
    grpo = ok.get("grpo")
    verify = (grpo or {}).get("verify_per_min_of_those_run") or 80.0
    grpo_per_token = None
    if grpo:
        grpo_per_token = grpo["train_s"] / (grpo["tasks"] * grpo["n_samples"] * (prompt + grpo["max_new_tokens"]))
    bf16 = Rates(ok["sft_bf16"]["tokens_per_s_steady"] or ok["sft_bf16"]["tokens_per_s_session"],
                 ok["rollout"]["lean"]["tokens_per_s"], verify, grpo_per_token)
    cases = {"bf16 base, lean rollout": (workload, bf16)}
    if "sft_8bit" in ok and "generate_8bit" in ok:
        eight = dataclasses.replace(bf16, sft_tokens_per_s=ok["sft_8bit"]["tokens_per_s_steady"]
                                    or ok["sft_8bit"]["tokens_per_s_session"],
                                    rollout_tokens_per_s=ok["generate_8bit"]["tokens_per_s"])
        cases = {"8-bit base (the profile as written), generate": (workload, eight), **cases}
    rows, table = cost_table(cases)
    return {"rows": rows, "table": table, "sft_scaling": 1.0,
            "assumptions": [f"SFT examples of {per_example:.0f} tokens on average",
                            f"every RL/eval sample {workload.completion_tokens:.0f} new tokens (max_new_tokens; the "
                            "stand-in always reaches it, a trained model stops at its code block: an upper bound)",
                            f"prompts of {prompt:.0f} tokens (the stand-in tokenizer's count)",
                            f"verification at {verify:.1f}/min for candidates that run (the grpo phase's references)",
                            "rollout tokens/s measured at the rollout phase's length, used for max_new_tokens",
                            "eight GPUs: SFT data-parallel at linear speed-up, verification over all GPUs, RL "
                            "generation and fine-tuning on one GPU"]}


def safe_cost(ctx: Ctx, results: dict[str, dict]) -> dict | None:
    try:
        return cost(ctx, results)
    except Exception as e:  # noqa: BLE001 - the summary still goes out
        return {"error": f"could not compute: {type(e).__name__}: {e}"}


def _grpo_line(x: dict, peak: str) -> str:
    """A GRPO step's split: verification overlaps generation, so the parts need not add up."""
    wait = x.get("verify_wait_s")
    return (f"step {x['step_s']} s: generate {x['generate_s']}, verifier busy {x['verify_s']}"
            + (f" ({wait} not hidden behind generation)" if wait is not None else " (partly behind generation)")
            + (f", train {x['train_s']}" if x.get("train_s") is not None and x["train_s"] >= 0 else "") + peak)


def summarise(ctx: Ctx, results: dict[str, dict]) -> str:
    lines = [f"# qwen7b on a random-weight stand-in ({ctx.source.hub_id or ctx.source.name}): RANDOM WEIGHTS, "
             "measurement only", ""]
    for name in PHASES:
        r = results.get(name)
        if r is None:
            lines.append(f"- {name}: not run yet")
            continue
        head = f"- {name}: {r['status']} ({r.get('seconds', 0):.0f} s)"
        if r["status"] != "ok":
            lines.append(f"{head}: {r.get('error', '')[:400]}")
            continue
        x = r["result"]
        peak = f", peak GPU {x['peak_gpu_allocated_gb']} GB" if x.get("peak_gpu_allocated_gb") is not None else ""
        detail = {
            "env": lambda: (f"{x.get('gpu', 'no GPU')} {x.get('gpu_memory_gb', '')} GB; torch {x['torch']}, transformers "
                            f"{x['transformers']}, peft {x['peft']}, trl {x['trl']}, bitsandbytes {x['bitsandbytes']}"),
            "build": lambda: (f"{x['n_params'] / 1e9:.2f} B params, {x['weight_bytes'] / 2**30:.1f} GiB in {x['shards']} "
                              f"shards, {x['seconds']} s on {x['device']}, peak host RSS "
                              f"{x.get('peak_rss_of_build_process_mb', x['peak_rss_mb']):,.0f} MB"
                              + (f", peak GPU {x['peak_gpu_mb']:,.0f} MB" if x.get("peak_gpu_mb") else "")),
            "data": lambda: (f"{x['sft_examples']} SFT examples of {x['sft_mean_tokens']} tokens on average; RL prompts "
                             f"{x['rl_prompt_mean_tokens']} tokens on average"),
            "sft_bf16": lambda: f"{x['tokens_per_s_steady']} tokens/s after the first step{peak}",
            "sft_8bit": lambda: f"{x['tokens_per_s_steady']} tokens/s after the first step{peak}",
            "rollout": lambda: (f"lean {x['lean']['tokens_per_s']} tok/s (batch {x['lean']['batch_size']}, peak "
                                f"{x['lean']['peak_gpu_allocated_gb']} GB), lean one batch "
                                f"{x['lean_one_batch']['tokens_per_s']} tok/s, generate {x['generate']['tokens_per_s']}"
                                f" tok/s; {x['lean_note']}"),
            "grpo": lambda: _grpo_line(x, peak),
            "grpo_profile": lambda: _grpo_line(x, peak),
            "generate_8bit": lambda: f"{x['tokens_per_s']} tok/s ({x['engine']}){peak}",
            "best_of_n": lambda: f"rollout {x['rollout']['seconds']} s, verify {x['verify']['seconds']} s, kept {x['kept']}{peak}",
            "eval": lambda: f"{x['generation'].get('tokens_per_s')} tok/s, record labelled: {x['labelled']}{peak}",
        }.get(name, lambda: "")
        try:
            lines.append(f"{head}: {detail()}")
        except (KeyError, TypeError) as e:  # a result from an older version of this script
            lines.append(f"{head}: (cannot summarise: {type(e).__name__} {e})")
    c = safe_cost(ctx, results)
    if c and "error" in c:
        lines += ["", f"cost: {c['error']}"]
    elif c:
        lines += ["", "GPU-hours of the source's full run (benchmarks/qwen7b_cost.py):", "", c["table"], "",
                  "Assumptions: " + "; ".join(c["assumptions"]) + "."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- driver


def run_phase_here(ctx: Ctx, name: str) -> int:
    """Child side: run one phase, write its result file."""
    from tritonrl_lib.model import load as models

    ctx.results.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    record: dict[str, Any] = {"phase": name}
    try:
        record.update(status="ok", result=getattr(phases, f"phase_{name}")(ctx))
    except phases.Skip as e:
        record.update(status="skipped", error=str(e))
    except Exception as e:  # noqa: BLE001 - every failure is recorded, with its cause
        oom = isinstance(e, models.GPUMemoryError) or models.is_out_of_memory(e)
        message = str(e) if isinstance(e, models.GPUMemoryError) else \
            (models.out_of_memory_message(OOM_STAGE.get(name, name), None, e) if oom else f"{type(e).__name__}: {e}")
        record.update(status="failed", out_of_memory=oom, error=message, traceback=traceback.format_exc()[-4000:])
    record["seconds"] = round(time.perf_counter() - t0, 1)
    (ctx.results / f"{name}.json").write_text(json.dumps(record, indent=1, default=str))
    return 0


def read_results(ctx: Ctx) -> dict[str, dict]:
    out = {}
    for name in PHASES:
        f = ctx.results / f"{name}.json"
        if f.is_file():
            out[name] = json.loads(f.read_text())
    return out


def publish(ctx: Ctx) -> str:
    """results.json, summary.md and the phase logs into --out (at most 8 files come back from there)."""
    out = Path(ctx.args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = read_results(ctx)
    summary = summarise(ctx, results)
    (out / "results.json").write_text(json.dumps({"phases": results, "cost": safe_cost(ctx, results)}, indent=1,
                                                 default=str))
    (out / "summary.md").write_text(summary + "\n")
    if ctx.logs.is_dir():
        shutil.make_archive(str(out / "logs"), "gztar", ctx.logs)
    return summary


def watch(proc: subprocess.Popen, deadline: float) -> float | None:
    """Wait for `proc` until `deadline`, polling nvidia-smi once a second for the GPU memory in use by
    every process (torch's own peak figures see only the phase's process); the peak in GiB."""
    smi = shutil.which("nvidia-smi")
    peak = None
    while proc.poll() is None and time.perf_counter() < deadline:
        if smi:
            try:
                used = subprocess.run([smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                      capture_output=True, text=True, timeout=5).stdout.split()
                if used:
                    peak = max(peak or 0.0, round(float(used[0]) / 1024, 2))
            except (subprocess.SubprocessError, ValueError):
                smi = None
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    return peak


def _model_present(ctx: Ctx) -> bool:
    from tritonrl_lib.model import standin

    return standin.is_complete(ctx.model)


def _sft_data_present(ctx: Ctx) -> bool:
    return ctx.config("sft-bf16").paths.sft_train.is_file()


# phases whose products later phases read from the work folder (lost with a fresh machine)
ARTIFACTS = {"build": _model_present, "data": _sft_data_present}


def resume_from(ctx: Ctx, path: str) -> list[str]:
    """Write an earlier call's phase records (its results.json) into this work folder where this one has
    none; the names of those written."""
    earlier = json.loads(Path(path).read_text()).get("phases") or {}
    ctx.results.mkdir(parents=True, exist_ok=True)
    written = []
    for name, record in earlier.items():
        target = ctx.results / f"{name}.json"
        if name in PHASES and isinstance(record, dict) and not target.is_file():
            target.write_text(json.dumps(record, indent=1, default=str))
            written.append(name)
    return written


def drive(ctx: Ctx) -> int:
    a = ctx.args
    t_start = time.perf_counter()
    wanted = [p for p in PHASES if not a.phases or p in a.phases.split(",")]
    ctx.logs.mkdir(parents=True, exist_ok=True)
    if a.resume:
        if Path(a.resume).is_file():
            print(f"resumed from {a.resume}: {', '.join(resume_from(ctx, a.resume)) or 'nothing new'}", flush=True)
        else:
            print(f"--resume {a.resume}: no such file; starting afresh", flush=True)
    results = read_results(ctx)
    pending = [p for p in wanted if p not in ARTIFACTS and p != "env" and not (
        p in results and (results[p]["status"] == "ok" or (results[p]["status"] == "failed" and not a.retry_failed)))]
    for name, present in ARTIFACTS.items():
        # a fresh machine: what an earlier call's phase made (the stand-in, the SFT data) is gone, and
        # the phases left need it: that phase runs again (its first record is kept beside)
        if pending and results.get(name, {}).get("status") == "ok" and not present(ctx):
            (ctx.results / f"{name}_first.json").write_text(json.dumps(results[name], indent=1, default=str))
            (ctx.results / f"{name}.json").unlink()
            if name not in wanted:
                wanted.append(name)
                wanted.sort(key=PHASES.index)
            print(f"[{name}] what it made is not on this machine: it runs again", flush=True)
    stopped = []
    for name in wanted:
        done = read_results(ctx).get(name)
        if done and (done["status"] == "ok" or (done["status"] == "failed" and not a.retry_failed)):
            print(f"[{name}] {done['status']} earlier; kept", flush=True)
            continue
        left = a.budget_s - (time.perf_counter() - t_start)
        need = 5 if a.quick else ESTIMATE_S[name]
        if left < need:
            stopped.append(name)
            continue
        print(f"[{name}] starting ({left:.0f} s of the budget left)", flush=True)
        result_file = ctx.results / f"{name}.json"
        result_file.unlink(missing_ok=True)  # a stale skipped/timeout record must not stand for this run
        cmd = [sys.executable, str(Path(__file__).resolve()), *ctx.argv, "--phase", name]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        t0 = time.perf_counter()
        with open(ctx.logs / f"{name}.log", "w") as log:
            # a session of its own: at the budget the phase goes with everything it started (verifier workers)
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            device_peak = watch(proc, deadline=t0 + max(5.0, left - 10))
        if proc.returncode is None:  # past the budget
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            result_file.write_text(json.dumps({
                "phase": name, "status": "timeout", "seconds": round(time.perf_counter() - t0, 1),
                "error": f"stopped at the budget after {time.perf_counter() - t0:.0f} s; runs again next time"}))
        elif not result_file.is_file():  # killed (the kernel's OOM killer?) or crashed before writing
            result_file.write_text(json.dumps({
                "phase": name, "status": "crashed", "seconds": round(time.perf_counter() - t0, 1),
                "error": f"exit status {proc.returncode} and no result; runs again next time. Log tail: "
                         + (ctx.logs / f"{name}.log").read_text()[-800:]}))
        if device_peak is not None:
            rec = json.loads(result_file.read_text())
            rec["peak_device_used_gb"] = device_peak  # every process on the GPU: the verifier's workers too
            result_file.write_text(json.dumps(rec, indent=1, default=str))
        res = read_results(ctx)[name]
        tail = (ctx.logs / f"{name}.log").read_text()[-1500:] if res["status"] not in ("ok", "skipped") else ""
        print(f"[{name}] {res['status']} in {time.perf_counter() - t0:.0f} s"
              + (f": {res.get('error', '')[:600]}" if res["status"] != "ok" else "") + (f"\n{tail}" if tail else ""),
              flush=True)
        publish(ctx)
    summary = publish(ctx)
    print("\n" + summary, flush=True)
    if stopped:
        print(f"\nnot started for lack of budget: {', '.join(stopped)}. Run the same command again to go on.")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    ctx = Ctx(args, argv)
    if args.phase:
        return run_phase_here(ctx, args.phase)
    return drive(ctx)


if __name__ == "__main__":
    sys.exit(main())
