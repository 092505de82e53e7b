"""Which tasks an evaluation runs: the run's held-out sets, the built-in suite or any task source,
capped deterministically.

Held-out sets (`eval_tasks=heldout`): the run's split gives two, named by `eval.heldout_sets`:
`tasks` = (a) unseen tasks of families trained on, `families` = (b) unseen families; `num_tasks`
caps each set. With `data.kernelbench` set, a third: `kernelbench` = the held-out part of the
run's KernelBench split (tasks/kernelbench.py), at the published sizes, every problem of it unless
`eval.kernelbench_num_tasks` caps it. Every task is tagged with its set (`meta["heldout_set"]`), so
every row of the record says which set it is in. A cap keeps every level represented and picks the same tasks in
every run and model stage (`stable_order`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Sequence

from ..core.config import ConfigError, RunConfig
from ..core.paths import RunPaths
from ..data.split import SplitUnavailable, heldout_set_of, is_heldout, load_run_split
from ..tasks.kernelbench import KernelBenchSplit, SplitOutOfDate, split_side_tasks
from ..tasks.loaders import TaskSourceError, load_tasks
from ..tasks.task import Task
from .errors import EvalError

# --------------------------------------------------------------------------- tasks


def stable_order(tasks: Sequence[Task]) -> list[Task]:
    """Tasks interleaved across levels, each level in an order fixed by a hash of the task id: a
    cap of n then keeps every level represented, and picks the same tasks in every run and stage
    (the seed is deliberately not involved, so runs with different seeds share their eval set)."""
    by_level: dict[int, list[Task]] = {}
    for t in tasks:
        by_level.setdefault(int(t.level), []).append(t)
    for lvl in by_level:
        by_level[lvl].sort(key=lambda t: hashlib.sha256(t.id.encode()).hexdigest())
    out: list[Task] = []
    queues = [by_level[lvl] for lvl in sorted(by_level)]
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def cap_tasks(tasks: Sequence[Task], num_tasks: int) -> list[Task]:
    """At most `num_tasks` tasks (0 or less: all), chosen by `stable_order`, then sorted by level
    and id for reading."""
    chosen = stable_order(tasks)
    if num_tasks > 0:
        chosen = chosen[:num_tasks]
    return sorted(chosen, key=lambda t: (t.level, t.id))


def heldout_task_ids(paths: RunPaths, tasks: Sequence[Task]) -> list[Task]:
    """The tasks the run's split holds out of training (by id or op family)."""
    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise EvalError(f"eval_tasks=heldout needs the run's split: {e}; or evaluate on eval_tasks=builtin") from None
    held = [t for t in tasks if is_heldout(split, t)]
    if not held:
        raise EvalError(f"the split at {paths.split} holds out none of the {len(tasks)} tasks loaded from "
                        f"{paths.split.parent}; was 01_data run with another task_source? Use eval_tasks=builtin")
    return held


HELDOUT_SETS = {"tasks": "(a) unseen tasks of trained families", "families": "(b) unseen families",
                "kernelbench": "held-out KernelBench problems, at published sizes"}


def heldout_sets(paths: RunPaths, tasks: Sequence[Task], names: Sequence[str]) -> dict[str, list[Task]]:
    """The run's held-out evaluation sets among `tasks`: name -> tasks, each task tagged with its
    set in `meta["heldout_set"]`. A set the split does not hold (an older split, or
    heldout_in_family=0) is left out; none at all is an EvalError."""
    own = [n for n in names if n != "kernelbench"]  # kernelbench's set is the run's KernelBench split's
    if not own:
        return {}
    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise EvalError(f"eval_tasks=heldout needs the run's split: {e}; or evaluate on eval_tasks=builtin") from None
    out: dict[str, list[Task]] = {}
    for name in names:
        if name not in HELDOUT_SETS:
            raise ConfigError(f"held-out set {name!r}: expected one of {', '.join(HELDOUT_SETS)}")
        if name == "kernelbench":
            continue
        chosen = [dataclasses.replace(t, meta={**t.meta, "heldout_set": name}) for t in tasks
                  if heldout_set_of(split, t) == name]
        if chosen:
            out[name] = chosen
    if not out:
        raise EvalError(f"the split at {paths.split} holds none of the {len(tasks)} tasks in the held-out sets "
                        f"{', '.join(names)}; was 01_data run with another task_source? Use eval_tasks=builtin")
    return out


def kernelbench_heldout(cfg: RunConfig, paths: RunPaths) -> list[Task]:
    """The held-out part of the run's KernelBench split, as published, each tagged with its set and
    category; EvalError when the run has no split or the checkout changed since it was made."""
    if not paths.kernelbench_split.is_file():
        raise EvalError(f"data.kernelbench is set but the run has no {paths.kernelbench_split.name}: run the data "
                        "stage first (notebooks/01_data.ipynb, or `tritonrl run --only 01_data`)")
    split = KernelBenchSplit.load(paths.kernelbench_split)
    try:
        held = split_side_tasks(split, "heldout", cfg.data.kernelbench)
    except SplitOutOfDate as e:
        raise EvalError(f"{e}; run the data stage again so the held-out part is the one RL never saw") from None
    except TaskSourceError as e:
        raise EvalError(f"the KernelBench checkout of the run's split: {e}") from None
    # the category as the split recorded it: the report groups by the split's (report/kernelbench.py)
    return [dataclasses.replace(t, meta={**t.meta, "heldout_set": "kernelbench",
                                          "category": split.categories.get(t.id, t.category)}) for t in held]


def load_eval_tasks(cfg: RunConfig, paths: RunPaths | None = None, source: str | None = None,
                    num_tasks: int | None = None) -> list[Task]:
    """The evaluation tasks: `source` (default cfg.eval.eval_tasks) is `heldout` (the run's held-out
    sets of data.task_source, eval.heldout_sets, each capped to `num_tasks`), `builtin`, a
    KernelBench checkout, a table file or a hub name; capped to `num_tasks` (default
    cfg.eval.num_tasks) deterministically."""
    source = (source or cfg.eval.eval_tasks).strip()
    n = cfg.eval.num_tasks if num_tasks is None else num_tasks
    try:
        if source == "heldout":
            paths = paths or cfg.paths
            sets = heldout_sets(paths, load_tasks(cfg.data.task_source, size=cfg.data.task_size),
                                cfg.eval.heldout_sets)
            chosen = [t for name in sets for t in cap_tasks(sets[name], n)]
            if cfg.data.kernelbench.strip():  # the benchmark the project reports on joins every held-out evaluation
                chosen += cap_tasks(kernelbench_heldout(cfg, paths), cfg.eval.kernelbench_num_tasks)
            return chosen
        else:
            tasks = load_tasks(source, size=cfg.data.task_size)
    except TaskSourceError as e:
        raise EvalError(f"eval tasks {source!r}: {e}") from None
    if not tasks:
        raise EvalError(f"no tasks in {source!r}")
    return cap_tasks(tasks, n)
