"""What an RL run starts from: the SFT adapter (02_sft) and the training tasks (the run's split
from 01_data, or the tasks `rl_tasks` names), plus, with `data.kernelbench` set, the train part of
the run's KernelBench split (never a held-out problem). A missing one is an `RLStartError` naming
the stage to run."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from ...core.config import ConfigError, RunConfig
from ...core.paths import RunPaths
from ...data.split import SplitUnavailable, is_heldout, load_run_split
from ...model import load as models
from ...tasks import load_tasks
from ...tasks.kernelbench import KernelBenchSplit, SplitOutOfDate, split_side_tasks
from ...tasks.task import Task
from .reward_tasks import tasks_for_training


class RLStartError(FileNotFoundError):
    """RL cannot start (no SFT adapter, no training tasks); the message names the stage to run."""


def start_adapter(paths: RunPaths) -> Path:
    """The SFT adapter RL continues from; a clear error naming 02_sft when it is missing."""
    sft = paths.sft_checkpoint
    if not models.checkpoint_complete(sft):
        raise RLStartError(f"no finished SFT adapter at {sft}: RL starts from it. Run the SFT stage first "
                           "(notebooks/02_sft.ipynb, or `tritonrl run --only 02_sft` with the same profile and run)")
    return sft


def heldout_filter(paths: RunPaths, tasks: Sequence[Task]) -> list[Task]:
    """The tasks NOT held out for evaluation by the run's split (data/split.py: by op family)."""
    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise RLStartError(f"rl_tasks=train needs the held-out split: {e}; or choose rl_tasks=all / level1 / "
                           "level2 / a list of task ids") from None
    return [t for t in tasks if not is_heldout(split, t)]


def _not_held_out(paths: RunPaths, tasks: Sequence[Task]) -> list[Task]:
    """heldout_filter where the run has a split (a damaged one is an error, not a reason to train on
    everything); every task where it has none (all / level1 / level2 work without the data stage)."""
    return heldout_filter(paths, tasks) if paths.split.is_file() else list(tasks)


def kernelbench_split(cfg: RunConfig, paths: RunPaths) -> KernelBenchSplit | None:
    """The run's KernelBench split (01_data wrote it), or None when `data.kernelbench` is not set."""
    if not cfg.data.kernelbench.strip():
        return None
    if not paths.kernelbench_split.is_file():
        raise RLStartError(f"data.kernelbench is set but the run has no {paths.kernelbench_split.name}: run the data "
                           "stage first (notebooks/01_data.ipynb, or `tritonrl run --only 01_data`)")
    return KernelBenchSplit.load(paths.kernelbench_split)


def kernelbench_train_tasks(cfg: RunConfig, split: KernelBenchSplit | None) -> list[Task]:
    """The train part of the run's KernelBench split, read from the checkout the split was made of
    (published sizes: RL's `train_task_scale` shrinks them like any other task)."""
    if split is None:
        return []
    try:
        return split_side_tasks(split, "train", cfg.data.kernelbench)
    except SplitOutOfDate as e:
        raise RLStartError(f"{e}; run the data stage again so the split matches the problems") from None


def select_rl_tasks(cfg: RunConfig, paths: RunPaths | None = None, tasks: Sequence[Task] | None = None) -> list[Task]:
    """The RL training tasks chosen by cfg.rl.rl_tasks:

    train        every task of cfg.data.task_source not held out by the run's split (the default; it needs the split)
    all          every task          level1 / level2   tasks of that level (level2 includes harder levels);
                 where the run has a split, none it holds out (RL never trains on what evaluation scores)
    kernelbench  the KernelBench split's train part alone (needs `data.kernelbench`): RL on the benchmark's
                 own surface form, none of the built-in suite's
    a,b,c        these task ids

    With `data.kernelbench` set, the train part of the KernelBench split joins the selection (its
    held-out part never does: naming a held-out problem is an error)."""
    paths = paths or cfg.paths
    if tasks is None:
        tasks = load_tasks(cfg.data.task_source, size=cfg.data.task_size)
    kb_split = kernelbench_split(cfg, paths)
    kb_train = kernelbench_train_tasks(cfg, kb_split)
    kb_ids = {t.id for t in kb_train}
    # a held-out KernelBench problem never reaches RL, whatever task_source also loads it
    tasks = [t for t in tasks if t.id not in kb_ids and (kb_split is None or kb_split.side(t.id) != "heldout")]
    own = tasks
    tasks = own + kb_train
    sel = cfg.rl.rl_tasks.strip()
    if sel == "train":
        chosen = heldout_filter(paths, own) + kb_train
    elif sel == "kernelbench":
        if kb_split is None:
            raise ConfigError("rl_tasks=kernelbench draws from the KernelBench split's train part: set data.kernelbench "
                              "to a KernelBench checkout (-p kernelbench=PATH) and run the data stage, or choose "
                              "rl_tasks=train / all / level1 / level2")
        chosen = list(kb_train)
    elif sel in ("all", "level1", "level2"):
        pool = _not_held_out(paths, own) + kb_train
        chosen = [t for t in pool if sel == "all" or (t.level == 1 if sel == "level1" else t.level >= 2)]
    else:
        wanted = [s.strip() for s in sel.split(",") if s.strip()]
        held = [w for w in wanted if kb_split is not None and kb_split.side(w) == "heldout"]
        if held:
            raise ConfigError(f"rl_tasks names KernelBench problems held out for evaluation: {', '.join(held[:5])}; "
                              "RL trains only on the split's train part")
        by_id = {t.id: t for t in tasks}
        missing = [w for w in wanted if w not in by_id]
        if missing:
            raise ConfigError(f"rl_tasks names unknown task ids: {', '.join(missing[:5])}"
                              f"{' ...' if len(missing) > 5 else ''}; ids look like {tasks[0].id if tasks else '?'} "
                              "(or use train / all / level1 / level2)")
        chosen = [by_id[w] for w in wanted]
    if not chosen:
        raise RLStartError(f"rl_tasks={sel!r} selects no tasks from {cfg.data.task_source!r}")
    return chosen


def pool_by_level(tasks: Iterable[Task]) -> dict[int, list[Task]]:
    """The tasks grouped by level: what the curriculum draws from."""
    out: dict[int, list[Task]] = {}
    for t in tasks:
        out.setdefault(int(t.level), []).append(t)
    return out


def training_tasks(cfg: RunConfig, paths: RunPaths, tasks: Sequence[Task] | None = None) -> list[Task]:
    """RL's training tasks (`select_rl_tasks`) at their training sizes (rl.train_task_scale, and the
    rl.train_task_max_mb cap measured into `paths.rl_train_sizes`, read back on every later call)."""
    return tasks_for_training(select_rl_tasks(cfg, paths, tasks), cfg.rl.train_task_scale, cfg.rl.train_task_max_mb,
                              cache=paths.rl_train_sizes)


def measure_training_sizes(cfg: RunConfig, paths: RunPaths) -> list[Task]:
    """`training_tasks`, run ahead on the data stage's cores so two RL methods started side by side do not each
    measure the same tasks. [] when rl.train_task_max_mb is 0 (no cap: nothing to measure)."""
    return training_tasks(cfg, paths) if cfg.rl.train_task_max_mb else []
