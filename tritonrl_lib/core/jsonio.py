"""Reading and writing the run's JSON and JSONL files, with one policy for damage.

    write_json(path, obj)       atomic: a killed writer leaves the old file or the new one, never half
    read_json(path, default)    `default` when the file is missing; DamagedFile when it is not JSON
    write_jsonl(path, rows)     atomic, one object per line, each line ending in a newline
    append_jsonl(path, row)     one line appended (logs written as work goes on)
    read_jsonl(path)            the objects of a JSONL file ([] when it is missing)

The policy for a damaged line: every writer ends each record with a newline, so a last line without
one that is not JSON is a record whose writer was killed mid-append; it is skipped (the work it
described is redone on resume). Any other line that is not a JSON object (in the middle of the file,
or a complete last line) means the file was damaged some other way: `DamagedFile` names the file
and line, and the fix. Blank lines are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

_MISSING = object()


class DamagedFile(ValueError):
    """A JSON or JSONL file that cannot be read as written; the message names the line and the fix."""

    def __init__(self, path: Path, line: int | None, why: str):
        self.path, self.line = Path(path), line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {why}; the file is damaged: delete it and re-run the notebook that writes it")


def _atomic_write(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def _plain(obj: Any) -> Any:
    return obj.to_dict() if hasattr(obj, "to_dict") else obj


def write_json(path: str | Path, obj: Any, indent: int | None = 2) -> Path:
    """`obj` (or its `to_dict()`) as JSON, atomically. Paths and other non-JSON values become strings."""
    return _atomic_write(Path(path), json.dumps(_plain(obj), indent=indent, ensure_ascii=False, default=str) + "\n")


def read_json(path: str | Path, default: Any = _MISSING) -> Any:
    """The JSON value in `path`. A missing file returns `default` (FileNotFoundError without one);
    a file that is not JSON raises DamagedFile."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if default is _MISSING:
            raise
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DamagedFile(path, e.lineno, f"not JSON ({e.msg})") from None


def _line(row: Any) -> str:
    return json.dumps(_plain(row), ensure_ascii=False, default=str) + "\n"


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> int:
    """Rows (dicts or objects with `to_dict`) one per line, atomically; returns how many."""
    lines = [_line(r) for r in rows]
    _atomic_write(Path(path), "".join(lines))
    return len(lines)


def append_jsonl(path: str | Path, row: Any) -> None:
    """One row appended as one line (with its newline, which marks the record complete)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(_line(row))
        f.flush()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a JSONL file, [] when it is missing; see the module docstring for damage."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")  # a complete file ends in "\n": its last element is ""
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):  # no newline after it: a record whose writer was killed mid-line
                break
            raise DamagedFile(path, i, f"not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise DamagedFile(path, i, f"a JSON {type(row).__name__}, not an object")
        out.append(row)
    return out
