"""RL, one entry for both methods: `train_rl(cfg)` runs cfg.rl.method from the run's SFT adapter.

    best_of_n   best_of_n.py: sample, verify, keep the top k correct per task, fine-tune; per round
    grpo        grpo.py: TRL's GRPOTrainer with rewards from the verifier pool; per optimizer step

Both open their run the same way (run_frame.py: start adapter and tasks from start.py, resume or a
fresh start), draw tasks through the curriculum (curriculum.py), sample with rollout/, verify in
the verifier pool, and record the best policy (best.py) and one log line per round or step
(log.py). They return an `RLResult`.

The same entry is the command each process runs when RL spans several GPUs (launch.py starts it;
distributed.py says who does what):

    accelerate launch --config_file params/accelerate/ddp.yaml --num_processes 4 \\
        -m tritonrl_lib.train.rl.entry --params gpu --run myrun [-p key=value ...]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Callable

from ...core.config import ConfigError, RunConfig, load_config
from ...core.jsonio import write_json
from ...core.paths import RunPaths
from ...model.load import ModelLoadError, explain_oom
from .distributed import leave_process_group
from .best_of_n import train_best_of_n
from .grpo import train_grpo
from .run_frame import RLResult
from .start import RLStartError

METHODS = {"best_of_n": train_best_of_n, "grpo": train_grpo}


def train_rl(cfg: RunConfig, paths: RunPaths | None = None, **kwargs) -> RLResult:
    """Run cfg.rl.method (best_of_n | grpo) with `kwargs` passed through (pool=, force=, echo=, ...)."""
    trainer = METHODS.get(cfg.rl.method)
    if trainer is None:
        raise ConfigError(f"rl.method={cfg.rl.method!r}: expected {' or '.join(METHODS)}")
    with explain_oom(cfg.rl.method, cfg):  # out of GPU memory: which setting to lower
        return trainer(cfg, paths, **kwargs)


def load_hook(spec: str | None) -> Callable | None:
    """An `extra_candidates` hook named `module:function` (a name travels to launched processes where
    a function cannot): e.g. tritonrl_lib.train.rl.best_of_n:reference_candidates."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ConfigError(f"extra candidates {spec!r}: expected module:function")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"extra candidates {spec!r}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonrl_lib.train.rl.entry",
        description="RL (rl.method) from the run's SFT adapter, resumable. Several GPUs of one host: "
                    "accelerate launch --config_file params/accelerate/ddp.yaml --num_processes N "
                    "-m tritonrl_lib.train.rl.entry ... (docs/MULTI_GPU.md)")
    parser.add_argument("--params", default="auto", help="profile (cpu, gpu, qwen7b, ...) or a settings YAML file")
    parser.add_argument("--run", default=None, help="run name (folder under outputs/); default the profile's")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting, e.g. -p method=grpo -p grpo_steps=10")
    parser.add_argument("--force", action="store_true", help="start again even over a finished RL run")
    parser.add_argument("--score-final", action="store_true", help="best-of-N: measure the final adapter too")
    parser.add_argument("--engine", default="auto", choices=("auto", "lean", "hf"), help="rollout engine")
    parser.add_argument("--extra-candidates", default=None, metavar="MODULE:FUNCTION",
                        help="candidates added to each group (tests, cold starts)")
    parser.add_argument("--status-file", default=None, metavar="FILE",
                        help="rank 0 writes how the run ended here, as JSON: {\"status\": trained | resumed | time_budget | "
                             "already_done, \"rounds_done\": N} (the launcher reads it, launch.py)")
    args = parser.parse_args(argv)
    _quiet_process()
    try:
        cfg = load_config(args.params, overrides={"run": args.run} if args.run else None, cli=args.param)
        kwargs = {"score_final": args.score_final} if cfg.rl.method == "best_of_n" else {}
        result = train_rl(cfg, force=args.force, engine=args.engine,
                          extra_candidates=load_hook(args.extra_candidates), **kwargs)
    except (ConfigError, RLStartError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    if args.status_file and int(os.environ.get("RANK", "0")) == 0:  # rank 0 speaks for the run
        write_json(args.status_file, {"status": result.status, "rounds_done": result.rounds_done})
    leave_process_group()  # several ranks: gone together, none aborting on gloo's threads at exit
    return 0


def _quiet_process() -> None:
    """A launched process's stderr as a notebook's reads: no third-party deprecation notices (nothing
    a reader can act on), and on ranks other than 0 no progress bars (rank 0's speak for the run)."""
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category,
                                module=r"(transformers|trl|peft|accelerate|datasets|torch)(\.|$)")
    if int(os.environ.get("RANK", "0")) > 0:
        import datasets
        from transformers.utils import logging as hf_logging

        datasets.disable_progress_bars()
        hf_logging.disable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
