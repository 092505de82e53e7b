"""Where an RL step's time goes: generate / verify / train seconds per best-of-N round or GRPO step,
and candidates verified per minute, from the RL log the trainers write (train/rl/log.py).

    python benchmarks/rl_step.py --out DIR --from-run outputs/gpu --method best_of_n --steps 3   # GPU
    python benchmarks/rl_step.py --out DIR --from-run outputs/gpu --method grpo --steps 3
    python benchmarks/rl_step.py --out DIR --from-run outputs/gpu --method grpo -p overlap_chunks=1  # no overlap
    python benchmarks/rl_step.py --out DIR --profile smoke --quick --inject-references           # CPU: it runs

The run's split and SFT adapter are copied from `--from-run` (never modified) into a run of its own
(DIR/runs/<method>); with `--quick` (the smoke profile on a CPU) a fresh LoRA adapter and the
split are made instead. `--steps` best-of-N rounds or GRPO steps run with the profile's settings
and the `-p key=value` overrides. `--inject-references` adds each task's reference solution twice
per group, once with other prose around the same code (a known-correct candidate that costs the
verifier real work on the CPU, where the untrained tiny model writes no code; the copy shows the
deduplication).

Columns (seconds): generate (the policy writing, first attempts and redraws), refine (writing
refinements), verify (the pool busy; overlapped with generation where chunks allow), wait
(generation finished, waiting for verdicts: what the overlap did not hide), train (best-of-N's
fine-tune and save; GRPO's loss, backward and step), step (the whole). cand/min: candidates over
the pool's busy time; unique: distinct (task, code) pairs the pool verified. Writes
DIR/rl_step_<method>.json (the log records and the table) and DIR/rl_step_<method>.md.
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
from tritonrl_lib.core.config import load_config, parse_cli_overrides  # noqa: E402

QUICK_TASKS = "builtin/L1/relu,builtin/L1/add,builtin/L1/abs,builtin/L2/gemm_bias_relu"


def _prepare(args, cfg) -> None:
    """The SFT adapter and split RL starts from, in the benchmark's own run."""
    paths = cfg.paths.ensure()
    if args.from_run:
        src = RunPaths(Path(args.from_run).resolve())
        if not models.checkpoint_complete(src.sft_checkpoint) or not src.split.is_file():
            raise SystemExit(f"--from-run {src.root}: needs a finished SFT adapter and the split (01_data, 02_sft)")
        shutil.copy2(src.split, paths.split)
        if not models.checkpoint_complete(paths.sft_checkpoint):
            shutil.rmtree(paths.sft_checkpoint, ignore_errors=True)
            shutil.copytree(src.sft_checkpoint, paths.sft_checkpoint, ignore=shutil.ignore_patterns("checkpoint-*"))
        return
    from tritonrl_lib.data.split import make_split
    from tritonrl_lib.tasks import load_tasks

    if not models.checkpoint_complete(paths.sft_checkpoint):
        model, tok = models.load_policy(cfg, trainable=True)
        models.save_checkpoint(model, tok, paths.sft_checkpoint, base_model=cfg.model.model,
                               extra={"stage": "sft", "note": "untrained LoRA (benchmarks/rl_step.py --quick)"})
    if not paths.split.is_file():
        tasks = load_tasks(cfg.data.task_source, size=cfg.data.task_size)
        make_split(cfg.seed, cfg.data.heldout_fraction, tasks, cfg.data.heldout_in_family,
                   levels=cfg.data.heldout_family_levels).save(paths.split)


def references_twice(task, step):
    from tritonrl_lib.model.prompts import format_completion

    if not task.reference_solution:
        return []
    return [format_completion(task.reference_solution),
            format_completion(task.reference_solution, "The same kernel, said differently.")]


def table(log: list[dict]) -> list[dict]:
    rows = []
    for r in log:
        t, v, sig = r.get("timing") or {}, r.get("verify") or {}, r.get("signal") or {}
        rows.append({"step": r.get("round", r.get("step")), "tasks": len(r.get("tasks", [])),
                     "candidates": v.get("candidates"), "unique": v.get("unique"),
                     "generate_s": t.get("generate_s"), "refine_s": t.get("refine_generate_s"),
                     "verify_s": t.get("verify_s"), "wait_s": t.get("verify_wait_s"), "train_s": t.get("train_s"),
                     "step_s": t.get("step_s"), "cand_per_min": v.get("per_minute"),
                     "unique_per_min": v.get("unique_per_minute"),
                     "signal": f"{sig.get('with_signal')}/{sig.get('groups')}" if sig else None,
                     "correct_rate": r.get("correct_rate"), "tokens_per_s": r.get("rollout_tokens_per_s")})
    return rows


def markdown(rows: list[dict], title: str) -> str:
    cols = ["step", "tasks", "candidates", "unique", "generate_s", "refine_s", "verify_s", "wait_s", "train_s",
            "step_s", "cand_per_min", "unique_per_min", "signal", "correct_rate"]
    heads = ["step", "tasks", "cand.", "unique", "generate s", "refine s", "verify s", "wait s", "train s",
             "step s", "cand/min", "unique/min", "groups with signal", "correct"]

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}" if v < 1 else f"{v:.1f}"
        return str(v)

    out = [f"### {title}", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    out += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the run and the results")
    ap.add_argument("--from-run", default=None, help="a run folder with the split and a finished SFT adapter")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--method", default="best_of_n", choices=("best_of_n", "grpo"))
    ap.add_argument("--steps", type=int, default=3, help="best-of-N rounds or GRPO steps")
    ap.add_argument("--quick", action="store_true", help="CPU: smoke-sized tasks, a fresh adapter, no --from-run")
    ap.add_argument("--inject-references", action="store_true", help="each group also gets its reference twice")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--force", action="store_true", help="start the benchmark's RL run again")
    args = ap.parse_args(argv)
    if not args.from_run and not args.quick:
        ap.error("give --from-run (a run with 01_data and 02_sft done) or --quick")
    out = Path(args.out).resolve()
    overrides = {"outputs_dir": str(out / "runs"), "run": args.method, "method": args.method,
                 "rounds": args.steps, "grpo_steps": args.steps}
    if args.quick:
        overrides.update({"rl_tasks": QUICK_TASKS, "tasks_per_round": 2, "n_samples": 4})
    overrides.update(parse_cli_overrides(args.param))
    cfg = load_config(args.profile, overrides=overrides)
    _prepare(args, cfg)
    from tritonrl_lib.train.rl.entry import train_rl
    from tritonrl_lib.train.rl.log import read_rl_log

    t0 = time.perf_counter()
    res = train_rl(cfg, cfg.paths, force=args.force,
                   extra_candidates=references_twice if args.inject_references else None)
    wall = time.perf_counter() - t0
    log = read_rl_log(cfg.paths)
    rows = table(log)
    title = (f"{args.method}, profile {args.profile}, {len(rows)} {'rounds' if args.method == 'best_of_n' else 'steps'}"
             f" of {cfg.rl.tasks_per_round} tasks x {cfg.rl.n_samples} samples, overlap_chunks={cfg.rl.overlap_chunks}, "
             f"redraw_rounds={cfg.rl.redraw_rounds}, refine_turns={cfg.rl.refine_turns}"
             + (", references injected twice per group" if args.inject_references else ""))
    md = markdown(rows, title)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rl_step_{args.method}.json").write_text(json.dumps(
        {"title": title, "wall_s": round(wall, 1), "status": res.status, "rows": rows, "log": log,
         "settings": {k: getattr(cfg.rl, k) for k in ("tasks_per_round", "n_samples", "overlap_chunks",
                                                      "redraw_rounds", "refine_turns", "max_new_tokens")},
         "argv": sys.argv[1:]}, indent=1, default=str))
    (out / f"rl_step_{args.method}.md").write_text(md)
    print(md)
    print(f"{res.summary()}\nwrote {out / f'rl_step_{args.method}.json'} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
