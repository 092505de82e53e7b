"""Held-out correct rate after RL beside after SFT, for both RL methods, plus RL's own throughput.

    python benchmarks/rl_heldout.py --out DIR --from-run outputs/gpu     # GPU, after `make run` (gpu profile)
    python benchmarks/rl_heldout.py --out DIR                            # GPU, makes its own data + SFT first
    python benchmarks/rl_heldout.py --out DIR --profile smoke --quick    # CPU: that the command works

1. The starting point: the split and SFT adapter of `--from-run` (copied, never modified), or, without it,
   the data stage and SFT of the profile run here (`build_data`, `train_sft`).
2. Each method runs briefly from that SFT adapter in a run of its own (DIR/runs/rl_best_of_n,
   DIR/runs/rl_grpo): best-of-N for `--rounds` rounds, GRPO for `--grpo-steps` steps, the profile's
   other settings (tasks_per_round, n_samples, top_k, max_new_tokens) unchanged.
3. The SFT adapter and both RL adapters are evaluated by `evaluate.evaluate_model` on the same
   held-out tasks (the run's split: families never trained on), with the same k samples per task,
   sampling settings and seed, in one verifier pool.

Writes DIR/rl_heldout.json (everything, including each method's per-round/step log) and
DIR/rl_heldout.md (the tables for docs/RESULTS.md and docs/PERFORMANCE.md), and prints both tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonrl_lib.model import load as models  # noqa: E402
from tritonrl_lib.core.paths import RunPaths
from tritonrl_lib.core.config import load_config  # noqa: E402


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def _prepare_start(args, base_cfg, base_paths: RunPaths, say) -> dict:
    """Split + SFT adapter in the base run: copied from --from-run, or made here."""
    info: dict = {}
    if args.from_run:
        src = RunPaths(Path(args.from_run).resolve())
        if not models.checkpoint_complete(src.sft_checkpoint):
            raise SystemExit(f"--from-run {src.root}: no finished SFT adapter at {src.sft_checkpoint}")
        if not src.split.is_file():
            raise SystemExit(f"--from-run {src.root}: no split at {src.split} (run 01_data there first)")
        base_paths.ensure()
        shutil.copy2(src.split, base_paths.split)
        if base_paths.sft_checkpoint.exists():
            shutil.rmtree(base_paths.sft_checkpoint)
        shutil.copytree(src.sft_checkpoint, base_paths.sft_checkpoint,
                        ignore=shutil.ignore_patterns("checkpoint-*"))
        info["start"] = f"copied from {src.root}"
        return info
    from tritonrl_lib.data.stage import build_data
    from tritonrl_lib.train.sft.train import train_sft

    t0 = time.perf_counter()
    build_data(base_cfg, base_paths.ensure())
    info["data_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    res = train_sft(base_cfg, base_paths, echo=say)
    info["sft_s"] = round(time.perf_counter() - t0, 1)
    info["sft"] = res.summary()
    info["start"] = "data stage and SFT run here"
    return info


def _method_run(args, out: Path, method: str, base_paths: RunPaths, overrides: dict, pool, say) -> dict:
    from tritonrl_lib.train.rl.entry import train_rl

    cfg = load_config(args.profile, overrides={**overrides, "outputs_dir": str(out / "runs"),
                                               "run": f"rl_{method}", "method": method})
    paths = cfg.paths.ensure()
    shutil.copy2(base_paths.split, paths.split)
    if not models.checkpoint_complete(paths.sft_checkpoint):
        if paths.sft_checkpoint.exists():
            shutil.rmtree(paths.sft_checkpoint)
        shutil.copytree(base_paths.sft_checkpoint, paths.sft_checkpoint, ignore=shutil.ignore_patterns("checkpoint-*"))
    t0 = time.perf_counter()
    res = train_rl(cfg, paths, pool=pool, echo=say)
    wall = time.perf_counter() - t0
    log = res.history or []
    tok = [r["rollout"]["tokens"] for r in log if r.get("rollout")]
    rs = [r["rollout"]["seconds"] for r in log if r.get("rollout")]
    vn = [r["verify"]["candidates"] for r in log if r.get("verify")]
    vs = [r["verify"]["seconds"] for r in log if r.get("verify")]
    return {"method": method, "status": res.status, "wall_s": round(wall, 1), "adapter": str(res.checkpoint),
            "rounds_or_steps": res.rounds_done, "best": res.best,
            "rollout_tokens_per_s": round(sum(tok) / sum(rs), 1) if rs and sum(rs) else None,
            "verifications_per_min": round(60 * sum(vn) / sum(vs), 1) if vs and sum(vs) else None,
            "train_correct_rate_first": log[0].get("correct_rate") if log else None,
            "train_correct_rate_last": log[-1].get("correct_rate") if log else None,
            "log": log, "settings": {k: getattr(cfg.rl, k) for k in (
                "n_samples", "top_k", "rounds", "grpo_steps", "tasks_per_round", "max_new_tokens", "temperature",
                "rl_learning_rate", "rl_tasks")}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--from-run", default="", help="a run folder (outputs/<run>) with split.json and checkpoints/sft")
    ap.add_argument("--rounds", type=int, default=2, help="best-of-N rounds")
    ap.add_argument("--grpo-steps", type=int, default=8)
    ap.add_argument("--methods", default="best_of_n,grpo",
                    help="comma-separated RL methods to run (each beside SFT; two GPUs can run one each)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes: a CPU check that the command works")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="more overrides for every run, e.g. -p tasks_per_round=8")
    args = ap.parse_args(argv)
    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in ("best_of_n", "grpo")]
    if not wanted or unknown:
        ap.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from best_of_n, grpo")

    from tritonrl_lib.core.config import parse_cli_overrides
    from tritonrl_lib.eval.run import evaluate_model
    from tritonrl_lib.eval.heldout import load_eval_tasks
    from tritonrl_lib.verify.pool import VerifierPool

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(msg: str) -> None:
        lines.append(msg)
        print(msg, flush=True)

    overrides = {"rounds": args.rounds, "grpo_steps": args.grpo_steps, **parse_cli_overrides(args.param)}
    if args.quick:
        overrides.update({"num_tasks": 2, "eval_k": 1, "tasks_per_round": 2, "n_samples": 2, "max_new_tokens": 32})
    base_cfg = load_config(args.profile, overrides={**overrides, "outputs_dir": str(out / "runs"), "run": "start"})
    base_paths = base_cfg.paths.ensure()
    t_all = time.perf_counter()
    result: dict = {"profile": args.profile, "overrides": overrides, "start": _prepare_start(args, base_cfg, base_paths, say)}
    device = models.resolve_device(base_cfg.device)
    if device == "cuda":
        import torch

        result["device"] = torch.cuda.get_device_name(0)
    else:
        import os
        import platform

        result["device"] = f"cpu ({os.cpu_count()} cores, {platform.machine()})"

    tasks = load_eval_tasks(base_cfg, base_paths)
    result["eval_tasks"] = [t.id for t in tasks]
    with VerifierPool(base_cfg.verify) as pool:
        methods = {m: _method_run(args, out, m, base_paths, overrides, pool, say) for m in wanted}
        result["methods"] = {m: {k: v for k, v in r.items()} for m, r in methods.items()}
        evals = {}
        for stage, folder in [("sft", base_paths.sft_checkpoint)] + [
                (f"rl_{m}", Path(r["adapter"])) for m, r in methods.items()]:
            ev = evaluate_model(base_cfg, str(folder), tasks, model_stage=stage, adapter=folder,
                                out=out / f"eval_{stage}.json", pool=pool, force=True, log=say)
            evals[stage] = ev.record
    result["wall_s"] = round(time.perf_counter() - t_all, 1)

    # ---- tables
    k = evals["sft"].get("k", base_cfg.eval.eval_k)
    head = ["| stage | correct % | L1 correct % | L2 correct % | compiled % | fast_1 % | pass@1 % |",
            "|---|---|---|---|---|---|---|"]
    for stage, rec in evals.items():
        m = rec["metrics"]
        lv = m.get("by_level", {})
        head.append(f"| {stage} | {_pct(m.get('correct_rate'))} | {_pct(lv.get('1', {}).get('correct_rate'))} | "
                    f"{_pct(lv.get('2', {}).get('correct_rate'))} | {_pct(m.get('compiled_rate'))} | "
                    f"{_pct(m.get('fast1_rate'))} | {_pct(m.get('pass_at_1'))} |")
    perf = ["| method | wall s | rounds/steps | rollout tokens/s | verifications/min | train correct % first -> last |",
            "|---|---|---|---|---|---|"]
    for m, r in methods.items():
        first, last = r["train_correct_rate_first"], r["train_correct_rate_last"]
        perf.append(f"| {m} | {r['wall_s']} | {r['rounds_or_steps']} | {r['rollout_tokens_per_s']} | "
                    f"{r['verifications_per_min']} | "
                    f"{_pct(None if first is None else 100 * first)} -> {_pct(None if last is None else 100 * last)} |")
    md = (f"Held-out tasks: {len(tasks)} ({', '.join(sorted({f'L{t.level}' for t in tasks}))}), k={k} samples each, "
          f"seed {base_cfg.seed}, device {result['device']}, profile {args.profile}.\n\n"
          + "\n".join(head) + "\n\n" + "\n".join(perf) + "\n")
    (out / "rl_heldout.md").write_text(md)
    result["evals"] = {s: {"metrics": r["metrics"], "sampling": r.get("sampling"), "k": r.get("k")}
                       for s, r in evals.items()}
    (out / "rl_heldout.json").write_text(json.dumps(result, indent=2, default=str))
    print()
    print(md)
    print(f"wrote {out / 'rl_heldout.json'} and {out / 'rl_heldout.md'} in {result['wall_s']}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
