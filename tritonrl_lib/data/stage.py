"""The data stage (what notebooks/01_data.ipynb runs): tasks -> labels, split, verified SFT examples.

Writes, through RunPaths only: tasks.jsonl (the loaded tasks, each tagged with its split side and
heuristic level in `meta`), difficulty_labels.jsonl, sft_train.jsonl and, last, split.json, which
also records the settings that produced the data and the measured counts. With `data.kernelbench`
set, kernelbench_split.json too: the checkout's Level 1/2 problems split into RL's train part and a
held-out part (tasks/kernelbench.py). Nothing of KernelBench enters the SFT corpus. A re-run whose settings
match a complete split.json skips the expensive generation; a killed run starts over but its
verifier work is answered from the verdict cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import RunConfig
from ..core.errors import ConfigError
from ..core.paths import RunPaths
from ..tasks import load_tasks
from ..tasks.kernelbench import KernelBenchSplit, load_kernelbench, make_kernelbench_split
from ..tasks.loaders import TaskSourceError
from ..tasks.task import Task
from .difficulty import difficulty_counts, label_difficulty, label_tasks
from .generate import (GenerationStats, family_weights, generate_sft_examples, generator_version, to_sft_example,
                       verify_tasks, weights_matching_nothing)
from .kernelbook import KernelBookLoad, load_kernelbook
from .records import DifficultyRecord, SFTExample, read_sft_examples, write_jsonl
from .split import Split, leaked_family, make_split


@dataclass
class DataResult:
    tasks: list[Task]
    labels: list[DifficultyRecord]
    split: Split
    examples: list[SFTExample]
    counts: dict[str, Any]
    skipped_generation: bool = False
    kernelbook: KernelBookLoad | None = None
    messages: list[str] = field(default_factory=list)


def kernelbook_options(cfg: RunConfig) -> tuple[bool, int]:
    """(verify KernelBook solutions?, max rows, 0 = all)."""
    return cfg.data.kernelbook_verify, cfg.data.kernelbook_max_rows


def data_pool_workers(cfg: RunConfig) -> int | None:
    """Training pairs need no timing, so on CPU workers they can use every core a GPU machine has
    (the interpreter plus the compile check gives the GPU's verdicts); None = the pool's default."""
    if cfg.verify.workers or cfg.data.data_verify_device != "cpu":
        return None
    return max(2, (os.cpu_count() or 2) - 2)


def data_verify_config(cfg: RunConfig):
    """The verifier settings of the corpus: the run's, without the workers' reference cache. Every
    generated example is a task of its own, so a kept reference is never used again; and a worker
    keeping hundreds of them ran out of the descriptors `select()` can watch (measured: 118 of 424
    candidates lost as `internal_error: filedescriptor out of range in select()`, 0 without).
    Nor timing: a training pair needs a correct kernel, not its speed, and on a GPU each timed
    candidate holds the GPU alone, so timing would put the corpus's candidates one after another."""
    return dataclasses.replace(cfg.verify, reference_cache_mb=0, timing="off")


def tasks_digest(tasks: list[Task]) -> str:
    """Which tasks (and families) the suite holds: the split, and so the data, depend on it."""
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.id):
        h.update(f"{t.id}\0{t.op_family}\0{t.level}\n".encode())
    return h.hexdigest()[:12]


def data_settings(cfg: RunConfig, tasks: list[Task] | None = None) -> dict[str, Any]:
    """Everything that changes the data stage's output; compared to skip a re-run. Pass the loaded
    `tasks` to include which ones the suite holds (build_data always does)."""
    kb_verify, kb_rows = kernelbook_options(cfg)
    v = cfg.verify
    digest = {"tasks": tasks_digest(tasks)} if tasks is not None else {}
    return {**digest, "seed": cfg.seed, "task_source": cfg.data.task_source, "task_size": cfg.data.task_size,
            "n_sft_examples": cfg.data.n_sft_examples, "heldout_fraction": cfg.data.heldout_fraction,
            "heldout_in_family": cfg.data.heldout_in_family,
            "heldout_family_levels": sorted(set(cfg.data.heldout_family_levels)),
            "sft_family_weights": sorted(str(e).replace(" ", "") for e in cfg.data.sft_family_weights),
            "kernelbook_source": cfg.data.kernelbook_source, "kernelbook_verify": kb_verify,
            "kernelbook_max_rows": kb_rows, "generator": generator_version(),
            "verify": {"policy": v.policy, "atol": v.atol, "rtol": v.rtol, "half_atol": v.half_atol,
                       "half_rtol": v.half_rtol, "num_variations": v.num_variations}}


def _count_lines(path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def data_is_current(cfg: RunConfig, paths: RunPaths, tasks: list[Task] | None = None) -> tuple[bool, str]:
    """Do the run's data files exist, complete, and come from these settings (and `tasks`)?"""
    for p in (paths.split, paths.sft_train, paths.difficulty_labels):
        if not p.is_file():
            return False, f"{p.name} is missing"
    try:
        old = Split.load(paths.split)
    except (ValueError, OSError) as e:
        return False, f"split.json unreadable ({e})"
    now = data_settings(cfg, tasks)
    if tasks is None:  # the caller did not load the tasks: compare everything else
        now["tasks"] = old.settings.get("tasks")
    if old.settings != now:
        changed = sorted(k for k in set(now) | set(old.settings) if now.get(k) != old.settings.get(k))
        return False, f"settings changed: {', '.join(changed)}"
    expected = old.counts.get("sft_examples")
    if expected is None or _count_lines(paths.sft_train) != expected:
        return False, "sft_train.jsonl does not hold the recorded number of examples"
    return True, "outputs match the settings"


def kernelbook_examples(load: KernelBookLoad, split: Split, pool, verify: bool) -> tuple[list[SFTExample], dict]:
    """SFT examples from normalised KernelBook rows, minus rows that are a held-out family's task,
    optionally minus rows whose solution the verifier rejects."""
    kept, leaks = [], Counter()
    for t in load.tasks:
        fam = leaked_family(label_difficulty(t.source).ops, split.heldout_families)
        if fam:
            leaks[fam] += 1
        else:
            kept.append(t)
    summary: dict[str, Any] = {**load.summary(), "heldout_family_rows": dict(leaks)}
    if verify and kept:
        before = len(kept)
        kept, failures = verify_tasks(kept, pool)
        summary["verify_failures"] = dict(failures.most_common())
        summary["pass_rate"] = round(len(kept) / before, 4)
    examples = [to_sft_example(t, t.reference_solution or "", variant="kernelbook", verified=verify) for t in kept]
    summary["sft_examples"] = len(examples)
    return examples, summary


def write_kernelbench_split(cfg: RunConfig, paths: RunPaths) -> KernelBenchSplit | None:
    """Split the checkout `data.kernelbench` names and write the split to the run (or remove a split
    an earlier run with another setting left). Cheap: done on every run of the data stage."""
    if not cfg.data.kernelbench.strip():
        paths.kernelbench_split.unlink(missing_ok=True)
        return None
    checkout = Path(cfg.data.kernelbench).expanduser()
    if not checkout.is_dir():
        raise TaskSourceError(f"data.kernelbench={cfg.data.kernelbench!r}: no such folder. Point it at a KernelBench "
                              "checkout (the folder holding KernelBench/level1/), or set it to '' for the built-in "
                              "suite alone")
    tasks = load_kernelbench(checkout)
    split = make_kernelbench_split(tasks, cfg.seed, cfg.data.kernelbench_heldout_fraction, str(checkout.resolve()))
    split.save(paths.kernelbench_split)
    return split


def build_data(cfg: RunConfig, paths: RunPaths, *, force: bool = False, progress: bool = True,
               pool=None) -> DataResult:
    """Run the data stage for `cfg`, writing the run's data files (see the module docstring)."""
    messages: list[str] = []
    start = time.perf_counter()
    kb_split = write_kernelbench_split(cfg, paths)
    if kb_split is not None:
        messages.append(f"KernelBench ({kb_split.checkout}): {len(kb_split.train_ids)} problems for RL to train on, "
                        f"{len(kb_split.heldout_ids)} held out for evaluation, stratified by level and category "
                        f"-> {paths.kernelbench_split}")
    tasks = load_tasks(cfg.data.task_source, size=cfg.data.task_size)
    settings = data_settings(cfg, tasks)  # taken before generating: it describes the code that makes the data
    split = make_split(cfg.seed, cfg.data.heldout_fraction, tasks, in_family=cfg.data.heldout_in_family,
                       levels=cfg.data.heldout_family_levels)
    try:  # a bad name stops the stage here, before any verifier starts
        family_weights(split.train_families, cfg.data.sft_family_weights)
    except ValueError as e:
        raise ConfigError(f"data.{e}; fix the entry (-p sft_family_weights=epilogue_chain:3,...)") from None
    idle = weights_matching_nothing(split.train_families, cfg.data.sft_family_weights)
    if idle:
        messages.append(f"sft_family_weights: {', '.join(idle)} names no train family (held out by the split): "
                        "it changes nothing")
    labels = label_tasks(tasks)
    kb_verify, kb_rows = kernelbook_options(cfg)
    kb = load_kernelbook(cfg.data.kernelbook_source, limit=kb_rows or None) if cfg.data.kernelbook_source else None
    if kb is not None:
        labels += label_tasks(kb.tasks)
        messages.append(f"KernelBook: {kb.n_kept} of {kb.n_rows} rows normalised; skipped {dict(kb.skipped)}")

    level_of = {r.id: r for r in labels}
    held_in = set(split.heldout_in_family_ids)
    manifest = [dataclasses.replace(t, meta={**t.meta, "split": "heldout_in_family" if t.id in held_in else split.side(t),
                                             "difficulty": level_of[t.id].level}) for t in tasks]
    write_jsonl(paths.tasks_manifest, [t.to_dict() for t in manifest])
    write_jsonl(paths.difficulty_labels, labels)

    current, why = (False, "forced") if force else data_is_current(cfg, paths, tasks)
    if current:
        old = Split.load(paths.split)
        examples = read_sft_examples(paths.sft_train)
        messages.append(f"data is current ({why}): kept {len(examples)} SFT examples, generation skipped")
        return DataResult(tasks, labels, old, examples, old.counts, True, kb, messages)
    messages.append(f"generating SFT data ({why})")

    own_pool = pool is None
    if own_pool and (cfg.data.n_sft_examples > 0 or (kb is not None and kb_verify)):
        from ..verify import VerifierPool  # imports torch: only when this call starts its own pool

        pool = VerifierPool(data_verify_config(cfg), cache=True, progress=False, device=cfg.data.data_verify_device,
                            workers=data_pool_workers(cfg))
    try:
        examples, gstats = generate_sft_examples(split.train_families, cfg.data.n_sft_examples, cfg.seed,
                                                 pool=pool, progress=progress, weights=cfg.data.sft_family_weights)
        kb_summary: dict[str, Any] = {}
        if kb is not None:
            kb_examples, kb_summary = kernelbook_examples(kb, split, pool, kb_verify)
            examples += kb_examples
    finally:
        if own_pool and pool is not None:
            pool.close()
    if gstats.kept < cfg.data.n_sft_examples:
        messages.append(f"only {gstats.kept} of {cfg.data.n_sft_examples} examples passed the verifier "
                        f"(failures: {dict(gstats.failures)})")
    starved = gstats.starved_message()
    if starved:
        messages.append(starved)
    write_jsonl(paths.sft_train, examples)
    split.settings = settings
    split.counts = {"sft_examples": len(examples), "generated": gstats.to_dict(), "kernelbook": kb_summary,
                    "tasks": len(tasks), "difficulty": difficulty_counts(labels),
                    "stage_wall_s": round(time.perf_counter() - start, 1)}
    split.save(paths.split)
    return DataResult(tasks, labels, split, examples, split.counts, False, kb, messages)


__all__ = ["DataResult", "build_data", "data_is_current", "data_settings", "kernelbook_examples",
           "GenerationStats"]
