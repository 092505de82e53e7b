"""`tritonrl eval`: evaluate one model, or the base / sft / rl models of a run side by side.

    tritonrl eval --model PATH [--tasks SOURCE] [--num_tasks N] [--k K] [--out FILE]
    tritonrl eval --compare [--run NAME] [--params PROFILE]

PATH: `embedded`, `tiny`, an HF model id, a model folder, an adapter folder, or `base` / `sft` /
`rl` for that stage of the run. SOURCE: `heldout` (the run's held-out tasks; needs 01_data),
`builtin`, a KernelBench checkout, a parquet/jsonl file, or a hub dataset name.
With --compare, the stages not evaluated yet (or evaluated with other settings) are evaluated,
then a table of the metrics per stage and level is printed. Exit status: 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ..core.config import load_config, parse_cli_overrides
from ..tasks.loaders import TaskSourceError
from .errors import EvalError
from .heldout import load_eval_tasks
from .identity import MODEL_STAGES, model_of
from .metrics import fast_p_table
from .record import format_table, metrics_table
from .run import evaluate_model, evaluate_run

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval", help="evaluate a model (--model) or a run's base/sft/rl side by side (--compare)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--model", metavar="PATH",
                      help="embedded | tiny | HF id | model folder | adapter folder | base | sft | rl")
    what.add_argument("--compare", action="store_true",
                      help="evaluate the run's stages (eval_stages) and print them side by side")
    p.add_argument("--tasks", metavar="SOURCE", default=None,
                   help="heldout | builtin | KernelBench checkout | parquet/jsonl | hub name (default: eval_tasks)")
    p.add_argument("--num_tasks", "--num-tasks", type=int, default=None, metavar="N",
                   help="evaluate at most N tasks, chosen deterministically across levels (0 = all)")
    p.add_argument("--k", type=int, default=None, help="samples per task (default: eval_k)")
    p.add_argument("--params", default="auto", metavar="PROFILE",
                   help="a profile in params/ or a YAML file; auto = gpu with a GPU, else cpu")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. -p eval_temperature=0.7 (repeatable)")
    p.add_argument("--run", default=None, help="the run folder under outputs/ (default: the profile's name)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="where --model writes its record (default: the run's eval/eval_<model>.json)")
    p.add_argument("--force", action="store_true", help="evaluate again even if a matching record exists")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)
    return p


def _bad(msg: str) -> int:
    print(f"tritonrl eval: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def slug(spec: str) -> str:
    """A file-name-safe label for a model spec (`Qwen/Qwen2.5-Coder-7B` -> `Qwen_Qwen2.5-Coder-7B`)."""
    p = Path(spec)
    name = f"{p.parent.name}_{p.name}" if p.exists() and p.parent.name else spec
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "model"


def looks_like_folder(spec: str) -> bool:
    """A model spec that can only be a local path: it starts like one (`./`, `/`, `~`), has more
    parts than a Hugging Face id (`owner/name`), or its first part is a folder here (`outputs/...`)."""
    if spec.startswith((".", "/", "~")):
        return True
    parts = Path(spec).parts
    return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())


def run(args: argparse.Namespace) -> int:
    if not args.model and not args.compare:
        return _bad("say what to evaluate: --model PATH (one model) or --compare (the run's base, sft and rl)")
    overrides = parse_cli_overrides(args.param)
    for key, value in (("eval_tasks", args.tasks), ("num_tasks", args.num_tasks), ("eval_k", args.k),
                       ("run", args.run)):
        if value is not None:
            overrides[key] = value
    cfg = load_config(args.params, overrides=overrides)  # ConfigError -> exit 2 with the fix (cli.main)
    paths = cfg.paths
    progress = not args.quiet and sys.stderr.isatty()
    log = (lambda s: None) if args.json else (lambda s: print(s, file=sys.stderr))
    try:
        if args.compare:
            if args.out:
                return _bad("--out goes with --model; --compare writes each stage to the run's eval/ folder")
            # no paths.ensure(): a command that fails (no such run, no split) leaves no empty run folder;
            # the eval record's writer makes eval/ when there is something to write
            result = evaluate_run(cfg, paths, force=args.force, progress=progress, log=log)
            records = result.records()
            skipped = [s for s in result.evals if s.status == "skipped"]
        else:
            if args.model in MODEL_STAGES:  # a model stage of the run, by name
                spec, adapter = model_of(cfg, paths, args.model)
                label = args.model
            else:
                spec, adapter, label = args.model, None, f"model_{slug(args.model)}"
                if looks_like_folder(spec) and not Path(spec).expanduser().exists():
                    return _bad(f"--model {spec}: no such folder (give a model or adapter folder, embedded, tiny, "
                                "a Hugging Face id such as Qwen/Qwen2.5-Coder-7B-Instruct, or base / sft / rl "
                                "for the run's models)")
            out = Path(args.out) if args.out else paths.eval_file(label)
            tasks = load_eval_tasks(cfg, paths)
            log(f"evaluating {spec} on {len(tasks)} task(s) from {cfg.eval.eval_tasks!r}")
            res = evaluate_model(cfg, spec, tasks, model_stage=label, adapter=adapter, out=out,
                                 task_source=cfg.eval.eval_tasks, force=args.force, progress=progress, log=log)
            records, skipped = {label: res.record}, []
            log(f"record: {out}")
    except (EvalError, TaskSourceError) as e:
        return _bad(str(e))
    if args.json:
        print(json.dumps({stage: {"model_path": rec["model_path"], "num_tasks": rec["num_tasks"], "k": rec["k"],
                                  "metrics": rec["metrics"]} for stage, rec in records.items()}, indent=1))
    else:
        print(format_table(metrics_table(records)))

        speed = fast_p_table(records)
        if speed:
            print("\nfast_p: % of samples correct and faster than p times the reference; geomean over correct timed "
                  "samples")
            print(format_table(speed))
        notes = sorted({n for rec in records.values() for n in rec.get("notes", [])})
        for n in notes:
            print(f"note: {n}")
    for s in skipped:
        print(f"skipped {s.model_stage}: {s.note}", file=sys.stderr)
    return EXIT_OK
