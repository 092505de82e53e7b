"""The tasks RL trains on, at sizes chosen for training (`rl.train_task_scale`, `rl.train_task_max_mb`).

A training reward needs the verdict's rules, not the evaluation's tensor sizes: at KernelBench-like
sizes one candidate's six input sets move hundreds of MB between processes, most of a GPU
verification's time. RL therefore trains on each task with its batch-like input sizes divided by
the scale (the first input-only size where a task has no batch-like one, as square matmuls), in the
prompt and in the reward alike, so the policy is rewarded for the very module it was shown. Sizes
that shape the model (`get_init_inputs`) never change: the weights and the op stay the task's own.
The verifier still draws its larger set and its other input sets around these sizes, and evaluation
keeps the tasks as they are.

A fixed scale is not enough for KernelBench's published sizes: at /4, 103 of the 130 problems of its
train part still held more than 256 MB per input set (43 more than 1 GB), so their candidates ran one at
a time on the GPU and a round of 160 candidates did not end in 7 minutes on an H100. With
`train_task_max_mb` set, each task's set (inputs, outputs and the reference's intermediates, measured on
PyTorch's meta device; the model's weights apart, which sizes cannot shrink) is brought under that cap by
dividing the same sizes further, by powers of two. The measurements are kept in the run's data folder
(`rl_train_sizes.json`), so a resumed run does not measure again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import Callable, Sequence

from ...core.jsonio import read_json, write_json
from ...tasks.kb_format import rewrite_constants
from ...tasks.task import Task
from ...verify.candidate.variations import is_batch_like, size_constants
from ...verify.sandbox.probe_batch import probe_sources

MAX_PASSES = 4  # measure, shrink, measure again: a task's set bytes need not fall in proportion to one size
Probe = Callable[[Sequence[str]], list]  # sources -> footprints (probe_batch.probe_sources)


def shrinkable_sizes(source: str) -> dict[str, int]:
    """The size constants training may shrink, with their values: the batch-like input-only ones, else
    the first input-only one."""
    sizes = size_constants(source)
    names = sizes.input_only
    batch = [n for n in names if is_batch_like(n)]
    return {n: sizes.values[n] for n in (batch or names[:1]) if sizes.values[n] > 1}


def training_sizes(source: str, scale: int) -> dict[str, int]:
    """The size constants to rewrite in `source` for `scale` (empty: nothing to shrink)."""
    if scale <= 1:
        return {}
    return {n: max(1, v // scale) for n, v in shrinkable_sizes(source).items()}


def scaled_task(task: Task, scale: int, sizes: dict[str, int] | None = None, set_mb: float | None = None) -> Task:
    """`task` with its batch-like input sizes divided by `scale` (or set to `sizes`); the same task when
    nothing shrinks."""
    new = training_sizes(task.source, scale) if sizes is None else sizes
    measured = {} if set_mb is None else {"train_task_set_mb": round(set_mb, 1)}
    if not new:
        return dataclasses.replace(task, meta={**task.meta, **measured}) if measured else task
    meta = {**task.meta, "training_sizes": new, "train_task_scale": scale, **measured}
    return dataclasses.replace(task, source=rewrite_constants(task.source, new), meta=meta)


def set_bytes(footprint) -> int:
    """What one input set of a task holds beyond the model's weights (Footprint.peak_bytes less its
    parameters): the part that training sizes shrink."""
    return max(0, footprint.peak_bytes - footprint.param_bytes)


def tasks_for_training(tasks: Sequence[Task], scale: int, max_mb: int = 0, cache: str | Path | None = None,
                       probe: Probe | None = None) -> list[Task]:
    """Every task at its training sizes (ids unchanged: the curriculum and the split still know them).
    `max_mb` > 0: each task's input set brought under that many MB (see the module's docstring);
    `cache`: a JSON file of measurements to read and extend; `probe`: how sources are measured."""
    if scale < 1:
        raise ValueError(f"rl.train_task_scale={scale} must be at least 1 (1 = the tasks' own sizes)")
    if max_mb < 0:
        raise ValueError(f"rl.train_task_max_mb={max_mb} must be 0 (no cap) or a size in MB")
    sizes = {t.id: training_sizes(t.source, scale) for t in tasks}
    measured: dict[str, float | None] = {}
    if max_mb:
        measured = _fit_memory(tasks, sizes, max_mb << 20, cache, probe)
    return [scaled_task(t, scale, sizes[t.id], measured.get(t.id)) for t in tasks]


def training_sizes_note(tasks: Sequence[Task], max_mb: int) -> str:
    """One line for the run's log: how the cap met the training tasks."""
    sets = [t.meta.get("train_task_set_mb") for t in tasks]
    sized = [m for m in sets if m is not None]
    over = sum(m > max_mb for m in sized)
    return (f"RL training sizes: {len(sized)} of {len(tasks)} tasks measured, largest set "
            f"{max(sized, default=0):.0f} MB (cap {max_mb} MB)" + (f"; {over} stay above it (weights-only or "
            "unshrinkable sizes)" if over else "") + (f"; {len(tasks) - len(sized)} not measurable, at their "
            "scaled sizes" if len(sized) < len(tasks) else ""))


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def _fit_memory(tasks: Sequence[Task], sizes: dict[str, dict[str, int]], cap: int, cache: str | Path | None,
                probe: Probe | None) -> dict[str, float | None]:
    """Shrink `sizes` (in place) until each task's set fits `cap` bytes; returns each task's set in MB
    at its final sizes (None: not measurable, the task keeps its scaled sizes)."""
    probe = probe or probe_sources
    known: dict[str, int | None] = dict(read_json(cache, {})) if cache else {}
    start = len(known)
    pending = list(tasks)
    final: dict[str, float | None] = {}
    for attempt in range(MAX_PASSES + 1):  # the last pass only measures what the one before shrank
        sources = {t.id: rewrite_constants(t.source, sizes[t.id]) if sizes[t.id] else t.source for t in pending}
        new = sorted({s for s in sources.values() if _digest(s) not in known})
        for src, fp in zip(new, probe(new) if new else []):
            known[_digest(src)] = None if fp is None else set_bytes(fp)
        over = []
        for t in pending:
            held = known[_digest(sources[t.id])]
            final[t.id] = None if held is None else held / 2**20
            if held is None or held <= cap or attempt == MAX_PASSES:
                continue
            base = sizes[t.id] or shrinkable_sizes(t.source)
            factor = 2 ** math.ceil(math.log2(held / cap))
            smaller = {n: max(1, v // factor) for n, v in base.items()}
            if smaller != base:  # sizes already at 1 cannot help: the task stays as large as it is
                sizes[t.id] = smaller
                over.append(t)
        pending = over
        if not pending:
            break
    if cache and len(known) > start:
        write_json(cache, known)
    return final
