"""`tritonrl baselines`: measure this machine's reference times (eager PyTorch and torch.compile) of a task set.

    tritonrl baselines --tasks PATH [--modes eager,compile] [--out DIR] [--device cuda|cpu] [--timeout-s N]

PATH: a KernelBench checkout (or one of its levelN/ folders), `builtin`, `heldout`, a parquet/jsonl
file or a hub name, as `tritonrl eval --tasks` takes it. `--solved-in RECORD` (repeatable) keeps the
tasks some eval record answered correctly: the only ones whose times change a fast_p (a task never
solved has no fast sample whatever its baseline, eval/metrics.baseline_rows), at a fraction of the
cost. The file goes to DIR (default `<outputs_dir>/baselines/`, where `tritonrl eval` looks), named
after this machine; a rerun measures only what is missing. Timing uses the verifier's settings
(timing_warmup, timing_trials, timing_trim; change them with -p). Exit status: 0 done (tasks whose
reference failed are recorded as such), 2 bad input or no GPU without --device cpu.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .baselines import (DEFAULT_TIMEOUT_S, BaselineError, check_device, default_dir, measure_baselines,
                        solved_task_ids, summary_rows, timing_settings)
from ..core.config import load_config, parse_cli_overrides
from ..core.jsonio import read_json
from ..tasks.loaders import TaskSourceError
from .errors import EvalError
from .heldout import load_eval_tasks

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "baselines", help="measure this machine's eager and torch.compile reference times of a task set",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", metavar="PATH", required=True,
                   help="a KernelBench checkout or level folder | builtin | heldout | parquet/jsonl | hub name")
    p.add_argument("--modes", default="eager,compile", help="what to time: eager, compile or both (default)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="folder of the baselines files (default: <outputs_dir>/baselines, where eval looks)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default; fails plainly without a GPU) or cpu (tests; the file is labelled cpu)")
    p.add_argument("--timeout-s", "--timeout_s", dest="timeout_s", type=float, default=None, metavar="N",
                   help="time limit per task, compile included (default 600)")
    p.add_argument("--num_tasks", "--num-tasks", type=int, default=0, metavar="N",
                   help="at most N tasks, chosen as the evaluation chooses them (0 = all, the default)")
    p.add_argument("--solved-in", "--solved_in", dest="solved_in", action="append", default=[], metavar="RECORD",
                   help="an eval record (JSON): measure only the tasks it has a correct sample of (repeatable: any)")
    p.add_argument("--force", action="store_true", help="measure every task again, even those in the file")
    p.add_argument("--params", default="auto", metavar="PROFILE", help="a profile in params/ or a YAML file")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. -p timing_trials=100 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def _bad(msg: str) -> int:
    print(f"tritonrl baselines: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def format_rows(rows: list[dict]) -> str:
    if not rows:
        return "(no tasks)"
    heads = {"eager_ms": "eager ms", "compile_ms": "compile ms", "compile_speedup": "eager/compile",
             "compile_s": "compile s"}
    cols = list(rows[0])

    def cell(v) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    table = [[heads.get(c, c) for c in cols]] + [[cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols) - 1)]
    return "\n".join("  ".join([v.ljust(w) if j == 0 else v.rjust(w) for j, (v, w) in enumerate(zip(row, widths))]
                               + [row[-1]]).rstrip() for row in table)


def read_records(names: list[str]) -> list[dict]:
    """The eval records named by --solved-in, each checked to hold per-sample results."""
    out = []
    for name in names:
        try:
            rec = read_json(Path(name).expanduser())
            if not isinstance(rec.get("detailed_results"), list):
                raise KeyError("detailed_results")
        except (OSError, ValueError, KeyError, AttributeError) as e:
            raise EvalError(f"--solved-in {name}: not a readable eval record with detailed_results "
                            f"({type(e).__name__}: {e}); give an eval JSON that tritonrl eval wrote") from e
        out.append(rec)
    return out


def run(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    cfg = load_config(args.params, overrides=parse_cli_overrides(args.param))
    out_dir = Path(args.out).expanduser() if args.out else default_dir(cfg.outputs_dir)
    timeout_s = float(args.timeout_s) if args.timeout_s is not None else DEFAULT_TIMEOUT_S
    if timeout_s <= 0:
        return _bad(f"--timeout-s {args.timeout_s}: give a positive number of seconds")
    timing = timing_settings(cfg.verify)
    try:
        check_device(args.device)
        tasks = load_eval_tasks(cfg, source=args.tasks, num_tasks=args.num_tasks)
        log = lambda s: print(s, file=sys.stderr)  # noqa: E731
        if args.solved_in:
            solved = solved_task_ids(read_records(args.solved_in))
            kept = [t for t in tasks if t.id in solved]
            log(f"--solved-in: {len(kept)} of the {len(tasks)} task(s) have a correct sample in "
                f"{len(args.solved_in)} record(s)" + (f"; {len(solved - {t.id for t in tasks})} solved task(s) are "
                                                      f"not among {args.tasks!r}" if solved - {t.id for t in tasks}
                                                      else ""))
            tasks = kept
            if not tasks:
                print("no task has a correct sample in these records: nothing to measure (no baseline can make a "
                      "wrong sample fast: their fast_p against the baselines is 0)")
                return EXIT_OK
        log(f"baselines of {len(tasks)} task(s) from {args.tasks!r} on {args.device}, modes {','.join(modes)}; "
            f"{timing['trials']} trials after {timing['warmup']} warm-up, {timeout_s:g} s per task at most")
        store, counts = measure_baselines(tasks, modes=modes, device=args.device, out_dir=out_dir, timing=timing,
                                          timeout_s=timeout_s, force=args.force,
                                          progress=not args.quiet and sys.stderr.isatty(), log=log)
    except (BaselineError, EvalError, TaskSourceError) as e:
        return _bad(str(e))
    rows = summary_rows(store, tasks)
    print(format_rows(rows))
    failed = sum(1 for r in rows if r["problem"])
    print(f"\n{len(rows)} task(s): {counts['measured']} measured now, {counts['reused']} already in the file; "
          f"eager timed for {sum(r['eager_ms'] is not None for r in rows)}, torch.compile for "
          f"{sum(r['compile_ms'] is not None for r in rows)}; {failed} with a failure recorded")
    print(f"file: {store.path}")
    return EXIT_OK
