"""Resuming an evaluation mid-way. An evaluation is generate (a minute or two) then verify (several):
a call cut off in between must not throw either away. The completions are kept beside the record
until the record is written (`eval_<stage>.completions.json`); verdicts, as each comes in, in the
evaluation pool's verdict folder (`eval/verdicts`, evaluate.LazyPool). Same fingerprint only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .jsonio import DamagedFile, read_json, write_json
from .tasks.task import Task

COMPLETION_FIELDS = ("prompt_index", "sample_index", "text", "num_tokens", "prompt_tokens", "finish_reason", "seconds")


def partial_path(out: Path) -> Path:
    return out.with_name(out.stem + ".completions.json")


def verdicts_dir(eval_dir: Path) -> Path:
    """Where an evaluation's own pool keeps its verdicts (see LazyPool)."""
    return eval_dir / "verdicts"


def write_partial(path: Path, fp: dict[str, Any], completions: Sequence[Sequence[Any]], gen_stats: dict[str, Any]) -> None:
    rows = [[{k: getattr(c, k) for k in COMPLETION_FIELDS} if not isinstance(c, str) else {"text": c} for c in cs]
            for cs in completions]
    write_json(path, {"fingerprint": fp, "generation": gen_stats, "completions": rows})


def read_partial(path: Path, fp: dict[str, Any], tasks: Sequence[Task], k: int
                 ) -> tuple[list[list[Any]], dict[str, Any]] | None:
    """The completions an earlier call generated for this very evaluation, or None."""
    from .rollout.results import Completion

    try:
        data = read_json(path, None)
    except (OSError, DamagedFile):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != fp:
        return None
    rows = data.get("completions")
    if not isinstance(rows, list) or len(rows) != len(tasks) or any(len(cs) != k for cs in rows):
        return None
    try:
        completions = [[c["text"] if set(c) == {"text"} else Completion(token_ids=[], **c) for c in cs] for cs in rows]
    except (TypeError, KeyError):
        return None
    return completions, data.get("generation") or {}
