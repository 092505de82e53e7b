"""The built-in task suite: KernelBench-format tasks written by the project, each with a Triton solution.

The files live in `tasks/builtin/` (see its README.md); `manifest.json` lists every task with its op
family and two size presets. "small" lets the Triton interpreter run a task in about a second;
"full" gives GPU-realistic sizes. Loading a task rewrites the module-level size constants of its
source to the chosen preset, so `Task.source` is always a plain KernelBench module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .families import category_of, level_of_category
from .kb_format import FormatProblem, TaskFormatError, check_kb_source, module_constants, rewrite_constants
from .task import Task

BUILTIN_DIR = Path(__file__).with_name("builtin")
MANIFEST_PATH = BUILTIN_DIR / "manifest.json"
SIZES = ("small", "full")


@dataclass(frozen=True)
class SuiteEntry:
    """One manifest row: a task file, its reference solution and its size presets."""

    id: str
    level: int
    name: str
    file: str  # relative to BUILTIN_DIR
    solution: str  # relative to BUILTIN_DIR
    op_family: str
    category: str
    description: str
    sizes: dict[str, dict[str, int | float]]
    variant_of: str = ""  # the original task's name, for a variant (tasks/variants.py); "" for an original

    @property
    def path(self) -> Path:
        return BUILTIN_DIR / self.file

    @property
    def solution_path(self) -> Path:
        return BUILTIN_DIR / self.solution


def check_size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"unknown task size {size!r}; use one of {', '.join(SIZES)} (setting data.task_size)")
    return size


def _entry_problems(raw: dict[str, Any], where: str) -> list[str]:
    """Why a manifest row is unusable (empty when it is fine)."""
    required = ("id", "level", "name", "file", "solution", "op_family", "category", "description", "sizes")
    missing = [k for k in required if k not in raw]
    if missing:
        return [f"{where} lacks {', '.join(missing)}"]
    out = []
    try:
        cat = category_of(raw["op_family"])
        if cat != raw["category"]:
            out.append(f"{where}: op_family {raw['op_family']!r} belongs to category {cat!r}, not {raw['category']!r}")
        elif level_of_category(cat) != raw["level"]:
            out.append(f"{where}: category {cat!r} is Level {level_of_category(cat)}, not Level {raw['level']}")
    except KeyError as e:
        out.append(f"{where}: {e.args[0]}")
    expected_id = f"builtin/L{raw['level']}/{raw['name']}"
    if raw["id"] != expected_id:
        out.append(f"{where}: id should be {expected_id!r}")
    sizes = raw["sizes"]
    if not isinstance(sizes, dict) or set(sizes) != set(SIZES):
        out.append(f"{where}: sizes must have exactly the presets {', '.join(SIZES)}")
    elif set(sizes["small"]) != set(sizes["full"]):
        out.append(f"{where}: presets small and full must set the same constants")
    for key in ("file", "solution"):
        if not (BUILTIN_DIR / raw[key]).is_file():
            out.append(f"{where}: {key} {raw[key]!r} does not exist under {BUILTIN_DIR}")
    return out


def load_manifest() -> list[SuiteEntry]:
    """Read and check manifest.json: known families, consistent levels, unique ids, files present."""
    rows = json.loads(MANIFEST_PATH.read_text())["tasks"]
    problems: list[str] = []
    seen: set[str] = set()
    entries = []
    for i, raw in enumerate(rows):
        where = f"task #{i} ({raw.get('id', '?')})"
        row_problems = _entry_problems(raw, where)
        if raw.get("id") in seen:
            row_problems.append(f"{where}: duplicate id")
        seen.add(raw.get("id"))
        problems.extend(row_problems)
        if not row_problems:
            entries.append(SuiteEntry(**{k: raw[k] for k in SuiteEntry.__dataclass_fields__ if k in raw}))
    if problems:
        raise TaskFormatError([FormatProblem(str(MANIFEST_PATH), p, "correct the manifest row") for p in problems])
    return entries


def select_levels(levels: Iterable[int] | int | None) -> set[int] | None:
    """`levels` as a set (None keeps every level); a single int is accepted."""
    if levels is None:
        return None
    return {int(x) for x in ([levels] if isinstance(levels, int) else levels)}


def load_builtin(size: str = "small", *, levels: Iterable[int] | int | None = None,
                 limit: int | None = None) -> list[Task]:
    """The built-in suite as Tasks, sources resized to `size` ("small" or "full"), Level 1 first."""
    check_size(size)
    wanted = select_levels(levels)
    entries = [e for e in load_manifest() if wanted is None or e.level in wanted]
    entries.sort(key=lambda e: (e.level, e.name))
    if limit is not None:
        entries = entries[: max(0, int(limit))]
    tasks: list[Task] = []
    problems: list[FormatProblem] = []
    for e in entries:
        try:
            source = rewrite_constants(e.path.read_text(), e.sizes[size], path=str(e.path))
        except KeyError as err:
            problems.append(FormatProblem(str(e.path), str(err.args[0]), f"correct sizes.{size} in the manifest"))
            continue
        unset = sorted(set(module_constants(source)) - set(e.sizes[size]))
        if unset:
            problems.append(FormatProblem(str(e.path), f"sizes.{size} in the manifest leaves {', '.join(unset)} unset",
                                          "give every module-level size constant a value in both presets"))
            continue
        _, file_problems = check_kb_source(source, str(e.path))
        problems.extend(file_problems)
        if file_problems:
            continue
        tasks.append(Task(
            id=e.id,
            level=e.level,
            name=e.name,
            source=source,
            op_family=e.op_family,
            category=e.category,
            origin="builtin",
            description=e.description,
            reference_solution=e.solution_path.read_text(),
            meta={"file": e.file, "solution_file": e.solution, "size": size, "sizes": e.sizes,
                  **({"variant_of": e.variant_of} if e.variant_of else {})},
        ))
    if problems:
        raise TaskFormatError(problems)
    return tasks
