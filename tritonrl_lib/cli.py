"""The `tritonrl` command line: run the pipeline, inspect settings, verify, evaluate."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from typing import Callable

from .core.config import ConfigError, _leaf_paths, load_config, parse_cli_overrides
from .core.settings_doc import DESCRIPTIONS
from .model.load import ModelLoadError
from .run.pipeline import Interrupted, NotebookFailed, run_pipeline

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default="auto", metavar="PROFILE",
                   help="a profile in params/ (cpu, gpu, gpu_long, qwen7b, smoke) or a YAML file; auto = gpu with a GPU, else cpu")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. -p n_samples=10 (repeatable)")


def cmd_run(args: argparse.Namespace) -> int:
    overrides = parse_cli_overrides(args.param)
    only = [s for s in (args.only or "").split(",") if s]
    try:
        result = run_pipeline(args.params, run=args.run, overrides=overrides, force=args.force, only=only)
    except NotebookFailed as e:
        print(f"\n{e.notebook.name} failed: {e.ename}: {ANSI.sub('', e.evalue)}", file=sys.stderr)
        print(ANSI.sub("", e.traceback)[-4000:], file=sys.stderr)
        print(f"\nThe executed notebook is kept at {e.executed}; fix the cause and run the same command "
              "again: finished notebooks are skipped.", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(interrupted_line(e, args), file=sys.stderr)
        return e.exit_code
    ran = sum(s.status == "ran" for s in result.steps)
    print(f"finished: {ran} notebook(s) ran, {len(result.steps) - ran} skipped; outputs in {result.config.paths.root}")
    for s in result.stale:
        print(f"STALE, not run (--only): {s.notebook}: {s.why}")
    report = result.config.paths.report_html
    if report.is_file():
        print(f"report: {report}" + (" (it marks what is stale)" if result.stale else ""))
    return 0


def resume_command(args: argparse.Namespace) -> str:
    """The command line that resumes this run: the same one, less --force (which would redo what is done)."""
    argv = [a for a in getattr(args, "argv", None) or ["run"] if a != "--force"]
    return shlex.join(["tritonrl", *argv])


def interrupted_line(e: Interrupted, args: argparse.Namespace) -> str:
    """One line: that the run was interrupted, where, and how to go on."""
    if not e.step:
        return (f"tritonrl run: interrupted ({e.how}) between notebooks; the finished ones are kept, and "
                f"`{resume_command(args)}` goes on from there")
    m, s = divmod(int(e.wall_s), 60)
    return (f"tritonrl run: interrupted ({e.how}) during {e.step}, {m}m {s:02d}s in; the notebooks before it are "
            f"kept, and `{resume_command(args)}` resumes from {e.step} (with what it had saved)")


def cmd_config(args: argparse.Namespace) -> int:
    cfg = load_config(args.params, cli=args.param)
    if args.list:
        flat = cfg.flat()
        for name, path in _leaf_paths().items():
            print(f"{'.'.join(path):34s} {flat[name]!r:12s}  {DESCRIPTIONS.get(name, '')}")
        print("\n(set any of them by its bare or dotted name: -p n_samples=4, -p rl.n_samples=4)")
        return 0
    print(f"# profile {cfg.profile}, run folder {cfg.paths.root}")
    import yaml

    print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the numbered notebooks in order into outputs/<run>/")
    _add_config_args(p)
    p.add_argument("--run", default=None, help="run folder name under outputs/ (default: the profile's name)")
    p.add_argument("--force", action="store_true", help="re-run notebooks that already finished")
    p.add_argument("--only", default="", help="comma-separated notebooks to run, e.g. 02_sft,03_rl")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("config", help="show the resolved settings of a profile")
    _add_config_args(p)
    p.add_argument("--list", action="store_true", help="one line per setting: its name, value and what it does")
    p.set_defaults(func=cmd_config)

    for register in _plugin_registrars():
        register(sub)
    return parser


def _plugin_registrars() -> list[Callable]:
    """Subcommands that live beside the code they drive (verify, eval, ...)."""
    out = []
    for module in ("tritonrl_lib.verify.command", "tritonrl_lib.eval.command", "tritonrl_lib.eval.baselines_command",
                   "tritonrl_lib.model.standin"):
        try:
            mod = __import__(module, fromlist=["add_parser"])
        except ModuleNotFoundError as e:
            if e.name and module.startswith(e.name):
                continue  # that part of the project is not installed in this checkout
            raise
        out.append(mod.add_parser)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    try:
        return args.func(args)
    except (ConfigError, ModelLoadError) as e:
        print(f"tritonrl: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside a pipeline step (a step's is Interrupted, above)
        print(f"tritonrl {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early
        return 0


if __name__ == "__main__":
    sys.exit(main())
