"""Resuming an evaluation mid-way. An evaluation is generate (a minute or two) then verify (several):
a call cut off in between must not throw either away.

Everything an unfinished evaluation keeps lives in one hidden folder beside its record, named after
the record and its fingerprint (`.eval_sft.resume-<digest>/`): `completions.json`, written once
generation has finished, and `verdicts/`, where the evaluation's pool stores each verdict as it
comes in (verify/cache.py's keys and rules: nothing that depends on the machine's load). Another
fingerprint (other weights, tasks, sampling, verifier settings, device) finds another folder, so
nothing stale is ever read. Writing the record removes every such folder of that record; a forced
evaluation removes them first. run_state treats the folders as scratch.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.jsonio import DamagedFile, read_json, write_json
from ..rollout.results import Completion
from ..tasks.task import Task

COMPLETION_FIELDS = ("prompt_index", "sample_index", "text", "num_tokens", "prompt_tokens", "finish_reason", "seconds")
RESUME_MARK = ".resume-"


def resume_dir(out: Path, fp: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return out.with_name(f".{out.stem}{RESUME_MARK}{digest}")


def is_resume_folder(name: str) -> bool:
    """Whether a path part names such a folder (run_state's scratch, the session's export skip it)."""
    return name.startswith(".") and RESUME_MARK in name


def clear_resume(out: Path) -> None:
    """Remove what unfinished evaluations of this record kept (any fingerprint)."""
    for folder in out.parent.glob(f".{out.stem}{RESUME_MARK}*"):
        shutil.rmtree(folder, ignore_errors=True)


def partial_path(resume: Path) -> Path:
    return resume / "completions.json"


def verdicts_dir(resume: Path) -> Path:
    return resume / "verdicts"


def write_partial(path: Path, fp: dict[str, Any], completions: Sequence[Sequence[Any]], gen_stats: dict[str, Any]) -> None:
    rows = [[{k: getattr(c, k) for k in COMPLETION_FIELDS} if not isinstance(c, str) else {"text": c} for c in cs]
            for cs in completions]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"fingerprint": fp, "generation": gen_stats, "completions": rows})


UNVERIFIED = "not verified"  # how a cut pass's unjudged sample's error begins (eval_from_verdicts.py)


def judged(row: Mapping[str, Any]) -> bool:
    """Did this eval row's sample get a verdict? (False for one a cut pass never reached: it is scored
    from what was kept, benchmarks/eval_from_verdicts.py, and counted wrong.)"""
    return not str(row.get("error") or "").startswith(UNVERIFIED)


def completions_of(rows: Sequence[Sequence[dict[str, Any]]]) -> list[list[Any]]:
    """Kept completions ([task][sample] dicts of COMPLETION_FIELDS) as the rollout gave them: Completions,
    so a record built from them keeps each sample's finish_reason (a loop stopped shows as one)."""
    return [[c["text"] if set(c) == {"text"} else Completion(token_ids=[], **c) for c in cs] for cs in rows]


def read_partial(path: Path, fp: dict[str, Any], tasks: Sequence[Task], k: int
                 ) -> tuple[list[list[Any]], dict[str, Any]] | None:
    """The completions an earlier call generated for this very evaluation, or None (missing,
    damaged, or of other settings)."""
    try:
        data = read_json(path, None)
    except (OSError, DamagedFile):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != fp:
        return None
    try:
        rows = data["completions"]
        if len(rows) != len(tasks) or any(len(cs) != k for cs in rows):
            return None
        completions = completions_of(rows)
    except (TypeError, KeyError, AttributeError):
        return None
    return completions, data.get("generation") or {}


def kept_stages(eval_dir: Path) -> list[str]:
    """The model stages that kept an unfinished evaluation under `eval_dir` (any task list)."""
    return sorted({p.name[len(".eval_"):p.name.index(RESUME_MARK)] for p in eval_dir.glob(f".eval_*{RESUME_MARK}*")})


def kept_for_tasks(eval_dir: Path, stage: str, tasks: Sequence[Task],
                   expect: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """(folder, completions.json) of the kept generation of `stage` under `eval_dir` made for exactly
    `tasks` (a cut evaluation, scored or read afterwards). Its answers are matched to tasks by
    position, so a folder of another task list (another profile's held-out sets, another split) is
    never taken; nor one whose fingerprint differs from `expect` in any key `expect` names (sampling,
    verifier settings: record.settings_fingerprint), whose verdicts would be judged under other rules.
    Among several that hold, the latest. ValueError says what was found otherwise."""
    from .record import tasks_digest  # record does not import this module: no cycle

    want = tasks_digest(tasks)
    expect = json.loads(json.dumps(expect or {}, default=str))  # as completions.json holds it (tuples as lists)
    found: list[tuple[float, Path, dict[str, Any]]] = []
    others: list[str] = []
    for folder in sorted(eval_dir.glob(f".eval_{stage}{RESUME_MARK}*")):
        path = partial_path(folder)
        try:
            data = json.loads(path.read_text())
            fp = data["fingerprint"]
            digest, n = fp["tasks"], len(data["completions"])
        except (OSError, ValueError, KeyError, TypeError):
            others.append(f"{folder.name} (no readable completions.json)")
            continue
        differ = sorted(k for k, v in expect.items() if fp.get(k) != v)
        if digest != want or n != len(tasks):
            others.append(f"{folder.name} ({n} tasks, digest {digest})")
        elif differ:
            others.append(f"{folder.name} (made with other settings: {', '.join(differ)})")
        else:
            found.append((path.stat().st_mtime, folder, data))
    if found:
        _, folder, data = max(found, key=lambda f: f[0])
        return folder, data
    seen = "; ".join(others) or "none"
    raise ValueError(f"no kept generation of stage {stage!r} under {eval_dir} for these {len(tasks)} tasks "
                     f"(digest {want}); found: {seen}. Pass the session's --profile and -p settings")
