"""Load tasks from any supported source: the built-in suite, a KernelBench checkout, or the
KernelBench dataset layout (hub name, parquet file or directory, jsonl).

`load_tasks(source)` dispatches on the source string; every loader returns `Task`s sorted by level
then problem number, and reports every malformed task file at once in one `TaskFormatError`.
External tasks keep their sizes exactly as published.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .builtin_suite import check_size, load_builtin, select_levels
from .devset_suite import load_devset
from .kb_format import FormatProblem, TaskFormatError, check_kb_source
from .task import Task

KERNELBENCH_COLUMNS = ("code", "level", "name", "problem_id")
_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TABLE_SUFFIXES = (".parquet", ".jsonl", ".json")


class TaskSourceError(ValueError):
    """A task source that cannot be found, read or recognised."""


def _problem_number(name: str) -> tuple[int, str]:
    m = re.match(r"^(\d+)_", name)
    return (int(m.group(1)) if m else 10**9, name)


def _finish(tasks: list[Task], levels: set[int] | None, limit: int | None) -> list[Task]:
    if levels is not None:
        tasks = [t for t in tasks if t.level in levels]
    tasks.sort(key=lambda t: (t.level, _problem_number(t.name)))
    return tasks if limit is None else tasks[: max(0, int(limit))]


def _external_task(source: str, *, level: int, name: str, where: str, origin: str,
                   meta: dict[str, Any]) -> tuple[Task | None, list[FormatProblem]]:
    info, problems = check_kb_source(source, where)
    if problems:
        return None, problems
    assert info is not None
    return Task(
        id=f"kernelbench/L{level}/{name}",
        level=level,
        name=name,
        source=source,
        origin=origin,
        description=info.description,
        meta=meta,
    ), []


# ---------------------------------------------------------------------------------------------
# KernelBench checkout


def kernelbench_level_dirs(root: str | Path) -> dict[int, Path]:
    """The `levelN/` folders of a KernelBench checkout: given the repo root or its KernelBench/ folder,
    or one `levelN/` folder itself (that level only)."""
    root = Path(root)
    own = _LEVEL_DIR.match(root.name)
    if own and root.is_dir() and any(root.glob("*.py")):
        return {int(own.group(1)): root}
    for base in (root / "KernelBench", root):
        if base.is_dir():
            found = {int(m.group(1)): p for p in base.iterdir()
                     if p.is_dir() and (m := _LEVEL_DIR.match(p.name))}
            if found:
                return dict(sorted(found.items()))
    return {}


def load_kernelbench_dir(root: str | Path, *, levels: Iterable[int] | int | None = None,
                         limit: int | None = None) -> list[Task]:
    """Every `KernelBench/levelN/*.py` file of a checkout, unchanged (id `kernelbench/L<N>/<stem>`)."""
    level_dirs = kernelbench_level_dirs(root)
    if not level_dirs:
        raise TaskSourceError(f"{root} is not a KernelBench checkout: expected folders like KernelBench/level1/ "
                              "(or level1/ directly) holding the task .py files")
    wanted = select_levels(levels)
    tasks: list[Task] = []
    problems: list[FormatProblem] = []
    for level, folder in level_dirs.items():
        if wanted is not None and level not in wanted:
            continue
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("__"):
                continue
            task, bad = _external_task(path.read_text(encoding="utf-8"), level=level, name=path.stem,
                                       where=str(path), origin="kernelbench-checkout", meta={"path": str(path)})
            problems.extend(bad)
            if task is not None:
                tasks.append(task)
    if problems:
        raise TaskFormatError(problems)
    return _finish(tasks, wanted, limit)


# ---------------------------------------------------------------------------------------------
# KernelBench dataset layout (code, level, name, problem_id)


def _read_table(path: Path) -> list[dict[str, Any]]:
    import pandas as pd  # local: pandas is only needed for table sources

    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    elif path.suffix == ".jsonl":
        frame = pd.read_json(path, lines=True)
    else:
        frame = pd.read_json(path)
    return frame.to_dict(orient="records")


def _table_rows(source: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """(label, rows) for each table in a local file, a directory of tables, or a hub dataset."""
    path = Path(source)
    if path.is_file():
        return [(str(path), _read_table(path))]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _TABLE_SUFFIXES)
        if not files:
            raise TaskSourceError(f"{path} holds no KernelBench level folders and no .parquet/.jsonl files")
        return [(str(p), _read_table(p)) for p in files]
    try:
        import datasets
    except ImportError as e:
        raise TaskSourceError(f"loading the hub dataset {source!r} needs the `datasets` package "
                              "(pip install 'tritonrl[train]'), or pass a local parquet file") from e
    try:
        loaded = datasets.load_dataset(source)
    except Exception as e:  # offline, unknown name, no access: all end the same way for the user
        first_line = (str(e).splitlines() or [""])[0][:200]
        raise TaskSourceError(
            f"could not load the hub dataset {source!r} ({type(e).__name__}: {first_line}), "
            "and no local file or folder has that name. Without network access, download its parquet files "
            "elsewhere and pass the file or folder path"
        ) from e
    splits = loaded.items() if isinstance(loaded, dict) else [("train", loaded)]
    return [(f"{source}[{split}]", [dict(r) for r in ds]) for split, ds in splits]


def load_kernelbench_dataset(source: str, *, levels: Iterable[int] | int | None = None,
                             limit: int | None = None) -> list[Task]:
    """Tasks from the KernelBench dataset layout: a hub name, a parquet/jsonl file, or a folder of them."""
    wanted = select_levels(levels)
    tasks: list[Task] = []
    problems: list[FormatProblem] = []
    seen: set[str] = set()
    for label, rows in _table_rows(source):
        if rows:
            missing = [c for c in KERNELBENCH_COLUMNS if c not in rows[0]]
            if missing:
                raise TaskSourceError(f"{label} lacks the KernelBench column(s) {', '.join(missing)} "
                                      f"(it has {', '.join(rows[0])}); expected columns "
                                      f"{', '.join(KERNELBENCH_COLUMNS)}")
        for i, row in enumerate(rows):
            level = int(row["level"])
            if wanted is not None and level not in wanted:
                continue
            name = str(row["name"]).removesuffix(".py")
            task, bad = _external_task(str(row["code"]), level=level, name=name,
                                       where=f"{label} row {i} ({name})", origin="kernelbench-dataset",
                                       meta={"problem_id": int(row["problem_id"]), "table": label})
            problems.extend(bad)
            if task is not None and task.id not in seen:
                seen.add(task.id)
                tasks.append(task)
    if problems:
        raise TaskFormatError(problems)
    return _finish(tasks, wanted, limit)


# ---------------------------------------------------------------------------------------------
# dispatch


def load_tasks(source: str, *, size: str = "small", levels: Iterable[int] | int | None = None,
               limit: int | None = None) -> list[Task]:
    """Load tasks from `source`, the setting `data.task_source`.

    - "builtin": the project's suite, sized by `size` ("small" for the interpreter, "full" for a GPU);
    - "devset": the development set SFT's settings are chosen on (tasks/devset/), sized likewise;
    - a KernelBench checkout (the repo root or its KernelBench/ folder), or one of its levelN/ folders;
    - a parquet / jsonl file or folder of them with columns code, level, name, problem_id;
    - a hub dataset name such as "ScalingIntelligence/KernelBench" (needs network access).
    External tasks keep their published sizes; `size` applies to the built-in suite only.
    """
    check_size(size)
    source = str(source).strip()
    if source == "builtin":
        return load_builtin(size, levels=levels, limit=limit)
    if source == "devset":
        return _finish(load_devset(size), select_levels(levels), limit)
    path = Path(source).expanduser()
    if path.is_dir():
        if kernelbench_level_dirs(path):
            return load_kernelbench_dir(path, levels=levels, limit=limit)
        return load_kernelbench_dataset(str(path), levels=levels, limit=limit)
    if path.is_file():
        if path.suffix not in _TABLE_SUFFIXES:
            raise TaskSourceError(f"{path}: task files come in a KernelBench checkout (levelN/ folders) or a "
                                  f"table ({', '.join(_TABLE_SUFFIXES)}); got a {path.suffix or 'suffix-less'} file")
        return load_kernelbench_dataset(str(path), levels=levels, limit=limit)
    if _HUB_NAME.match(source) and not source.endswith(_TABLE_SUFFIXES) and not source.startswith((".", "~")):
        return load_kernelbench_dataset(source, levels=levels, limit=limit)
    if source.startswith(("/", ".", "~")) or source.count("/") > 1 or source.endswith(_TABLE_SUFFIXES):
        raise TaskSourceError(f"{source}: no such file or folder (task sources: 'builtin', a KernelBench checkout "
                              "folder, a parquet/jsonl file, or a hub dataset name like 'owner/name')")
    raise TaskSourceError(f"unknown task source {source!r}: use 'builtin', 'devset', a KernelBench checkout directory, "
                          "a parquet/jsonl file or folder, or a hub dataset name like 'owner/name'")
