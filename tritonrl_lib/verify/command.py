"""`tritonrl verify TASK_FILE SOLUTION_FILE`: check one solution against one KernelBench-format task.

SOLUTION_FILE may be a plain module or a raw model completion (prose, fences, <think> ...): the
same extraction the pipeline uses picks the code out. Exit status: 0 correct, 1 not correct,
2 bad input (a missing file, a task file that is not KernelBench format, a bad setting).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..core.config import ConfigError, RunConfig, apply_overrides, load_config, parse_cli_overrides, validate
from ..tasks.kb_format import check_kb_source
from ..tasks.task import Task

EXIT_CORRECT, EXIT_INCORRECT, EXIT_BAD_INPUT = 0, 1, 2


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "verify", help="verify one solution (module or model completion) against one KernelBench task",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task_file", metavar="TASK_FILE", help="a KernelBench-format task module (class Model, "
                   "get_inputs, get_init_inputs)")
    p.add_argument("solution_file", metavar="SOLUTION_FILE", help="a module defining ModelNew, or a raw completion")
    p.add_argument("--json", action="store_true", help="print the Verdict as JSON")
    p.add_argument("--policy", choices=("auto", "strict", "fusion"), default=None,
                   help="how much PyTorch forward may keep (default: verify.policy; auto = strict for "
                   "Level 1, fusion for Level 2+)")
    p.add_argument("--level", type=int, default=None,
                   help="the task's level (default: read from a 'level<N>' part of the path, else 1)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where candidates run (auto: the GPU when one is visible)")
    p.add_argument("--params", default=None, metavar="PROFILE",
                   help="take the verify settings of a profile (cpu, gpu, ...) or a YAML file "
                   "(default: built-in defaults)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a verify setting, e.g. -p timeout_s=30 -p atol=1e-3 (repeatable)")
    p.set_defaults(func=run)
    return p


def _bad(msg: str) -> int:
    print(f"tritonrl verify: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def infer_level(path: Path) -> int:
    m = re.search(r"level[_\-]?(\d)", str(path), re.I)
    return int(m.group(1)) if m else 1


def run(args: argparse.Namespace) -> int:
    task_path, sol_path = Path(args.task_file), Path(args.solution_file)
    for label, path in (("task file", task_path), ("solution file", sol_path)):
        if not path.is_file():
            return _bad(f"{label} {path} not found" + (" (it is a directory)" if path.is_dir() else ""))
    try:
        source = task_path.read_text()
        completion = sol_path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return _bad(f"cannot read {e}")
    _, problems = check_kb_source(source, str(task_path))
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        return _bad(f"{task_path} is not a KernelBench-format task:\n{lines}")

    try:
        if args.params:
            cfg = load_config(args.params, cli=args.param)
        else:
            cfg = RunConfig()
            apply_overrides(cfg, parse_cli_overrides(args.param), origin="command line")
            validate(cfg)
        if args.policy:
            cfg.verify.policy = args.policy
    except ConfigError as e:
        return _bad(str(e))

    level = args.level if args.level is not None else infer_level(task_path)
    task = Task(id=str(task_path), level=level, name=task_path.stem, source=source, origin="file")

    from .pool import VerifierError, VerifierPool  # imports torch: registering the command must stay cheap

    try:
        with VerifierPool(cfg.verify, workers=1, device=args.device, progress=False) as pool:
            verdict = pool.verify(task, completion)
    except VerifierError as e:
        return _bad(str(e))
    if args.json:
        print(verdict.to_json(indent=2))
    else:
        print(format_verdict(verdict))
    return EXIT_CORRECT if verdict.correct else EXIT_INCORRECT


def format_verdict(v) -> str:
    head = "PASS" if v.correct else "FAIL"
    lines = [f"{head}  reward {v.reward:.2f}  last stage passed: {v.stage}  reason: {v.reason}  ({v.duration_s:.1f} s)"]
    if v.cheat_flags:
        lines.append("cheat flags: " + ", ".join(v.cheat_flags))
    for e in v.errors:
        status = "ok" if e.get("ok") else f"FAILED ({e.get('reason', 'cheat')})"
        err = f"max_abs {e['max_abs']:.3g}, max_rel {e['max_rel']:.3g}" if "max_abs" in e else ""
        lines.append(f"  {e['name']:<16} {e.get('inputs', ''):<28} {status:<24} {err}")
    if v.speedup is not None:
        lines.append(f"speedup {v.speedup:.2f}x (reference {v.ref_time_ms:.4f} ms, kernel {v.kernel_time_ms:.4f} ms)")
    for n in v.notes:
        lines.append(f"note: {n}")
    if v.error:
        lines.append("error:\n" + "\n".join("  " + ln for ln in v.error.strip().splitlines()[-25:]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tritonrl")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verify", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
