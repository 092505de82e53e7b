"""RL across the GPUs of one host: a best-of-N round and a GRPO step on 1, 2 and 4 GPUs, where the
time goes (generate / verify / train seconds) and how well each phase scales (docs/MULTI_GPU.md).

    # on a host with 4 GPUs (nvidia-h100-x4): the embedded model, then the 7B-shaped stand-in in bf16
    python benchmarks/rl_multi_gpu.py --out DIR --gpus 1,2,4 --models embedded --profile gpu
    python benchmarks/rl_multi_gpu.py --out DIR --gpus 1,2,4 --profile qwen7b \\
        --models standin:qwen2.5-coder-7b-instruct -p load_in_8bit=false
    python benchmarks/rl_multi_gpu.py --out DIR --quick      # the CPU: the script runs (1 and 2 CPU processes)

Each (model, method, GPU count) is a fresh RL run of its own (DIR/runs/<model>-<method>-g<N>) started
exactly as `tritonrl run -p gpus=N` starts 03_rl: `accelerate launch --config_file
params/accelerate/ddp.yaml --num_processes N -m tritonrl_lib.train.rl.entry` (one process for N = 1,
`python -m tritonrl_lib.train.rl.entry`, as `gpus: 1` runs in the notebook's kernel), on exactly N
GPUs (CUDA_VISIBLE_DEVICES cut to the first N: one process alone would otherwise spread its verifier
pool over every GPU it sees). The work per
step is fixed (strong scaling): `--tasks-per-round` groups of `--n-samples` completions, split across
the N processes; `--scaling weak` gives each process that much instead (N times the work on N GPUs: the
way to use more GPUs when one step's generation is already one batch). Best-of-N replays the SFT corpus
(`rl.replay_ratio`): `--from-run`'s, otherwise the suite's reference solutions stand in for it. Every run starts from the same adapter: `--from-run` copies a run's split and SFT
adapter (for the embedded model: its real SFT, so candidates reach the verifier's later stages);
otherwise a fresh LoRA on the model and a new split. `--steps` rounds or steps run; the first pays
the warm-up (CUDA graphs, the pool's workers, references compiled), so the table reports the last
(`--report first|last|mean` changes that), and the JSON keeps every step.
KernelBench's train part joins RL's tasks when `-p kernelbench=PATH` names a checkout, as in 03_rl.

Each group also gets the task's reference solution (best-of-N: beside the samples; GRPO: in place of
the first), unless `--no-references`: a known-correct candidate that gives the verifier real work
(compile, run, compare, time) and best-of-N something to keep and train on. The stand-in writes
random tokens (its completions run to max_new_tokens and hold no code), so with it the verifier's
work is the references alone; generation is the longest it can be.

Columns, from the RL log (train/rl/log.py; with several processes each phase is its slowest rank's):
samples (completions per step, all processes), generate (the policy writing), verify (the pool busy;
overlapped with generation across chunks), wait (generation done, waiting for verdicts), train
(best-of-N's fine-tune and save; GRPO's loss, backward, all-reduce and step), step (the whole).
speedup = w x step seconds on 1 GPU / on N; eff(phase) = w x phase seconds on 1 / (N x on N), w =
samples on N / on 1 (1 for strong scaling): 1.0 is perfect scaling of that phase, and the phase whose
efficiency falls first is where scaling stops. imbalance = the slowest rank's collect seconds / the
mean rank's. Writes DIR/rl_multi_gpu.json (every record) and DIR/rl_multi_gpu.md (the table).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonrl_lib.core.config import load_config, parse_cli_overrides  # noqa: E402
from tritonrl_lib.core.paths import RunPaths  # noqa: E402
from tritonrl_lib.model import load as models  # noqa: E402
from tritonrl_lib.train.rl.launch import launch_command, launch_env, settings_file  # noqa: E402
from tritonrl_lib.train.rl.log import read_rl_log  # noqa: E402

QUICK_TASKS = "builtin/L1/relu,builtin/L1/add,builtin/L1/abs,builtin/L2/gemm_bias_relu"
HOOK = "tritonrl_lib.train.rl.best_of_n:reference_candidates"
PHASES = ("generate_s", "verify_s", "wait_s", "train_s", "step_s")


def slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", model.split(":")[-1].split("/")[-1]).strip("-").lower()


def prepare_start(args, cfg, source: RunPaths) -> None:
    """The split and the SFT adapter every run of this model starts from, made once (`source`)."""
    source.ensure()
    if args.train_sizes and not source.rl_train_sizes.is_file():  # measured ahead (on the CPU: minutes)
        shutil.copy2(args.train_sizes, source.rl_train_sizes)
    if cfg.data.kernelbench.strip():  # RL draws KernelBench's train part beside the suite, as 03_rl does
        from tritonrl_lib.data.stage import write_kernelbench_split

        write_kernelbench_split(cfg, source)
    if args.from_run:
        src = RunPaths(Path(args.from_run).resolve())
        if not models.checkpoint_complete(src.sft_checkpoint) or not src.split.is_file():
            raise SystemExit(f"--from-run {src.root}: needs a finished SFT adapter and the split (01_data, 02_sft)")
        shutil.copy2(src.split, source.split)
        if src.sft_train.is_file():  # best-of-N's replay draws from the run's own SFT corpus
            shutil.copy2(src.sft_train, source.sft_train)
        if not models.checkpoint_complete(source.sft_checkpoint):
            shutil.copytree(src.sft_checkpoint, source.sft_checkpoint, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("checkpoint-*"))
        return
    from tritonrl_lib.data.split import make_split
    from tritonrl_lib.tasks import load_tasks

    if not models.checkpoint_complete(source.sft_checkpoint):
        model, tok = models.load_policy(cfg, trainable=True)
        models.save_checkpoint(model, tok, source.sft_checkpoint, base_model=cfg.model.model,
                               extra={"stage": "sft", "note": "untrained LoRA (benchmarks/rl_multi_gpu.py)"})
        del model
    tasks = None
    if not source.split.is_file():
        tasks = load_tasks(cfg.data.task_source, size=cfg.data.task_size)
        make_split(cfg.seed, cfg.data.heldout_fraction, tasks, cfg.data.heldout_in_family,
                   levels=cfg.data.heldout_family_levels).save(source.split)
    if cfg.rl.replay_ratio > 0 and not source.sft_train.is_file():
        replay_corpus(cfg, source, tasks)


def replay_corpus(cfg, source: RunPaths, tasks=None) -> None:
    """Without --from-run there is no SFT corpus for best-of-N's replay (rl.replay_ratio): the suite's own
    reference solutions stand in for it (the same count of replayed pairs per kept pair, so the
    fine-tune's work is the profile's; what they teach does not matter to a timing)."""
    from tritonrl_lib.core.jsonio import write_jsonl
    from tritonrl_lib.data.generate import to_sft_example
    from tritonrl_lib.tasks import load_tasks

    tasks = tasks if tasks is not None else load_tasks(cfg.data.task_source, size=cfg.data.task_size)
    rows = [to_sft_example(t, t.reference_solution, variant="reference", verified=False)
            for t in tasks if t.reference_solution]
    write_jsonl(source.sft_train, rows)


def run_one(args, cfg, n: int, source: RunPaths, log_dir: Path) -> tuple[list[dict], float, int]:
    """One RL run on `n` processes from `source`'s start: -> (its RL log, wall seconds, exit code)."""
    paths = cfg.paths.ensure()
    if args.force:
        shutil.rmtree(paths.rl_checkpoint, ignore_errors=True)
        for f in (paths.rl_log, paths.curriculum_log):
            f.unlink(missing_ok=True)
    shutil.copy2(source.split, paths.split)
    if source.sft_train.is_file():
        shutil.copy2(source.sft_train, paths.sft_train)
    if source.kernelbench_split.is_file():
        shutil.copy2(source.kernelbench_split, paths.kernelbench_split)
    if not models.checkpoint_complete(paths.sft_checkpoint):
        shutil.copytree(source.sft_checkpoint, paths.sft_checkpoint, dirs_exist_ok=True)
    # RL's training sizes, measured once and shared by every run (the first run that measures them hands them on)
    if source.rl_train_sizes.is_file() and not paths.rl_train_sizes.is_file():
        shutil.copy2(source.rl_train_sizes, paths.rl_train_sizes)
    try:
        return _launch(args, cfg, n, paths, log_dir)
    finally:
        if paths.rl_train_sizes.is_file() and not source.rl_train_sizes.is_file():
            shutil.copy2(paths.rl_train_sizes, source.rl_train_sizes)


def _launch(args, cfg, n: int, paths: RunPaths, log_dir: Path) -> tuple[list[dict], float, int]:
    with tempfile.TemporaryDirectory(prefix="rl-multi-gpu-") as tmp:
        settings = settings_file(cfg, Path(tmp))
        hook = None if args.no_references else HOOK
        if n == 1:  # what gpus=1 runs, in a process of its own like the others
            cmd = [sys.executable, "-m", "tritonrl_lib.train.rl.entry", "--params", str(settings)]
            cmd += ["--extra-candidates", hook] if hook else []
        else:
            cmd = launch_command(settings, n, extra_candidates=hook)
        out = log_dir / f"{cfg.run_name}.log"
        env = launch_env(n)
        gpus = visible_gpus()
        if len(gpus) >= n:  # exactly n GPUs: one process alone would spread its verifier pool over all
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:n])
        t0 = time.perf_counter()
        with out.open("w") as fh:
            code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
    return read_rl_log(paths), wall, code


def visible_gpus() -> list[str]:
    """The GPU ids this process may use (CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [x.strip() for x in env.split(",") if x.strip()]
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(x for x in listed.splitlines() if x.startswith("GPU "))]


def step_row(rec: dict) -> dict:
    t = rec.get("timing") or {}
    ranks = rec.get("ranks") or []
    collect = [r["timing"].get("collect_s", 0.0) for r in ranks]
    return {"generate_s": t.get("generate_s", 0.0) + t.get("refine_generate_s", 0.0), "verify_s": t.get("verify_s"),
            "wait_s": t.get("verify_wait_s"), "train_s": t.get("train_s"), "step_s": t.get("step_s"),
            "candidates": (rec.get("verify") or {}).get("candidates"),
            "tokens_per_s": rec.get("rollout_tokens_per_s"),
            "imbalance": round(max(collect) / (sum(collect) / len(collect)), 3) if collect and sum(collect) else None}


def reported(rows: list[dict], how: str) -> dict:
    if how == "first":
        return rows[0]
    if how == "last":
        return rows[-1]
    return {k: (sum(r[k] for r in rows) / len(rows) if all(isinstance(r[k], (int, float)) for r in rows) else None)
            for k in rows[0]}


def add_scaling(table: list[dict]) -> None:
    """speedup and per-phase efficiency of each row against the 1-GPU row of its model and method, per
    unit of work: w = the row's samples per step over the 1-GPU row's (1 when the work is fixed, N when
    it grows with the GPUs), speedup = w x step on 1 / step on N, eff(phase) = w x phase on 1 / (N x on N)."""
    for row in table:
        one = next((r for r in table if r["model"] == row["model"] and r["method"] == row["method"]
                    and r["gpus"] == 1 and r.get("step_s")), None)
        n = row["gpus"]
        w = row.get("samples", 1) / one.get("samples", 1) if one else 1.0
        row["speedup"] = round(w * one["step_s"] / row["step_s"], 2) if one and row.get("step_s") else None
        for ph in PHASES:
            key = "eff_" + ph[:-2]
            a, b = (one or {}).get(ph), row.get(ph)
            row[key] = round(w * a / (n * b), 2) if a and b else None


_HEADS = {"generate_s": "generate s", "verify_s": "verify s", "wait_s": "wait s", "train_s": "train s",
          "step_s": "step s", "eff_generate": "eff. generate", "eff_verify": "eff. verify", "eff_wait": "eff. wait",
          "eff_train": "eff. train", "eff_step": "eff. step", "tokens_per_s": "tokens/s"}


def markdown(table: list[dict], title: str) -> str:
    cols = ["model", "method", "gpus", "samples", "generate_s", "verify_s", "wait_s", "train_s", "step_s", "speedup",
            "eff_generate", "eff_verify", "eff_train", "eff_step", "imbalance", "candidates", "tokens_per_s"]

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.2f}" if v < 10 else f"{v:.1f}"
        return str(v)

    out = [f"### {title}", "", "| " + " | ".join(_HEADS.get(c, c) for c in cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in table]
    return "\n".join(out) + "\n"


def machine() -> str:
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout.split("\n")
        names = [n.strip() for n in names if n.strip()]
        if names:
            return f"{len(names)}x {names[0]}, {os.cpu_count()} cores"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"cpu ({os.cpu_count()} cores)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the runs and the results")
    ap.add_argument("--gpus", default="1,2,4", help="process counts to measure (default 1,2,4)")
    ap.add_argument("--models", default="embedded", help="comma-separated model specs (embedded, standin:NAME, ...)")
    ap.add_argument("--methods", default="best_of_n,grpo")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--from-run", default=None, help="a run folder with the split and a finished SFT adapter")
    ap.add_argument("--steps", type=int, default=2, help="best-of-N rounds or GRPO steps per run")
    ap.add_argument("--tasks-per-round", type=int, default=16, help="groups per step, over all processes")
    ap.add_argument("--n-samples", type=int, default=8)
    ap.add_argument("--report", default="last", choices=("first", "last", "mean"), help="which step the table shows")
    ap.add_argument("--no-references", action="store_true", help="no reference solution in each group")
    ap.add_argument("--quick", action="store_true", help="the CPU: smoke profile, tiny model, 1 and 2 processes")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--force", action="store_true", help="start each run again")
    ap.add_argument("--train-sizes", default="", help="a run's data/rl_train_sizes.json, measured ahead: RL's "
                    "training sizes for the same profile and tasks, so no run measures them")
    ap.add_argument("--scaling", default="strong", choices=("strong", "weak"),
                    help="strong: the same work per step on every GPU count; weak: --tasks-per-round per GPU")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    counts = [int(x) for x in args.gpus.split(",") if x.strip()]
    models_ = [m.strip() for m in args.models.split(",") if m.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    common = {"outputs_dir": str(out / "runs"), "rounds": args.steps, "grpo_steps": args.steps,
              "tasks_per_round": args.tasks_per_round, "n_samples": args.n_samples, "top_k": 1}
    if args.quick:
        args.profile, counts, models_ = "smoke", [1, 2] if args.gpus == "1,2,4" else counts, ["tiny"]
        common.update({"rl_tasks": QUICK_TASKS, "tasks_per_round": 2, "n_samples": 2, "workers": 1})
    common.update(parse_cli_overrides(args.param))
    table, raw = [], {}
    for model in models_:
        source_cfg = load_config(args.profile, overrides={**common, "model": model, "run": f"start-{slug(model)}"})
        # in a process of its own: loading the model here would leave this process's CUDA memory on GPU 0
        prep = multiprocessing.get_context("spawn").Process(target=prepare_start,
                                                            args=(args, source_cfg, source_cfg.paths))
        prep.start()
        prep.join()
        if prep.exitcode != 0:
            raise SystemExit(f"preparing the start of {model} failed (exit code {prep.exitcode})")
        for method in methods:
            for n in counts:
                name = f"{slug(model)}-{method}-g{n}" + ("-weak" if args.scaling == "weak" else "")
                per_step = {"tasks_per_round": common["tasks_per_round"] * (n if args.scaling == "weak" else 1)}
                cfg = load_config(args.profile, overrides={**common, **per_step, "model": model, "method": method,
                                                           "gpus": str(n), "run": name})
                if method == "grpo" and cfg.rl.tasks_per_round % n:
                    print(f"skip {name}: tasks_per_round={cfg.rl.tasks_per_round} does not split over {n}")
                    continue
                print(f"{name}: {cfg.rl.tasks_per_round} tasks x {cfg.rl.n_samples} samples on {n} process(es) ...",
                      flush=True)
                log, wall, code = run_one(args, cfg, n, source_cfg.paths, out / "logs")
                raw[name] = {"wall_s": round(wall, 1), "exit_code": code, "log": log}
                if code != 0 or not log:
                    print(f"  FAILED (exit code {code}): see {out / 'logs' / (name + '.log')}")
                    continue
                row = {"model": model, "method": method, "gpus": n,
                       "samples": cfg.rl.tasks_per_round * cfg.rl.n_samples,
                       **reported([step_row(r) for r in log], args.report)}
                table.append(row)
                print(f"  step {row['step_s']:.1f}s (generate {row['generate_s']:.1f}, verify {row['verify_s']:.1f}, "
                      f"wait {row['wait_s']:.1f}, train {row['train_s']:.1f}); run {wall:.0f}s", flush=True)
    add_scaling(table)
    per = " per process" if args.scaling == "weak" else ""
    title = (f"RL on 1..{max(counts)} processes of one host ({machine()}), profile {args.profile}, "
             f"{common['tasks_per_round']} tasks x {common['n_samples']} samples per step{per}, {args.report} of "
             f"{args.steps} steps" + ("" if args.no_references else ", each group with its reference solution"))
    md = markdown(table, title)
    (out / "rl_multi_gpu.md").write_text(md)
    (out / "rl_multi_gpu.json").write_text(json.dumps({"title": title, "machine": machine(), "argv": sys.argv[1:],
                                                       "settings": common, "table": table, "runs": raw},
                                                      indent=1, default=str))
    print(md)
    print(f"wrote {out / 'rl_multi_gpu.json'} and {out / 'rl_multi_gpu.md'}")
    return 0 if table else 1


if __name__ == "__main__":
    sys.exit(main())
