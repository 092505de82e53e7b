"""The tasks RL trains on, at sizes chosen for training (`rl.train_task_scale`).

A training reward needs the verdict's rules, not the evaluation's tensor sizes: at KernelBench-like
sizes one candidate's six input sets move hundreds of MB between processes, most of a GPU
verification's time. RL therefore trains on each task with its batch-like input sizes divided by
the scale (the first input-only size where a task has no batch-like one, as square matmuls), in the
prompt and in the reward alike, so the policy is rewarded for the very module it was shown. Sizes
that shape the model (`get_init_inputs`) never change: the weights and the op stay the task's own.
The verifier still draws its larger set and its other input sets around these sizes, and evaluation
keeps the tasks as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ...tasks.kb_format import rewrite_constants
from ...tasks.task import Task
from ...verify.candidate.variations import is_batch_like, size_constants


def training_sizes(source: str, scale: int) -> dict[str, int]:
    """The size constants to rewrite in `source` for `scale` (empty: nothing to shrink)."""
    if scale <= 1:
        return {}
    sizes = size_constants(source)
    names = sizes.input_only
    batch = [n for n in names if is_batch_like(n)]
    chosen = batch or names[:1]
    return {n: max(1, sizes.values[n] // scale) for n in chosen if sizes.values[n] > 1}


def scaled_task(task: Task, scale: int) -> Task:
    """`task` with its batch-like input sizes divided by `scale`; the same task when nothing shrinks."""
    new = training_sizes(task.source, scale)
    if not new:
        return task
    return dataclasses.replace(task, source=rewrite_constants(task.source, new),
                               meta={**task.meta, "training_sizes": new, "train_task_scale": scale})


def tasks_for_training(tasks: Sequence[Task], scale: int) -> list[Task]:
    """Every task at its training sizes (ids unchanged: the curriculum and the split still know them)."""
    if scale < 1:
        raise ValueError(f"rl.train_task_scale={scale} must be at least 1 (1 = the tasks' own sizes)")
    return [scaled_task(t, scale) for t in tasks]
