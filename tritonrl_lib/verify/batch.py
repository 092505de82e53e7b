"""Verifying a batch of candidates as cheaply as the verdict allows: each distinct (task, code)
once, and in the background while the next batch generates.

    verdicts, stats = verify_unique(pool, tasks, texts, config=training_verify_config(cfg))
    ahead = VerifyAhead(pool, config); fut = ahead.submit(tasks, texts); ...; fut.result()

A verdict depends only on the task, the code the verifier extracts from the completion and the
verifier's settings, so completions whose extracted code is identical (a policy that has
converged writes the same kernel several times; evaluation at a low temperature does too) are
verified once and the verdict is copied to the others, with a note saying so. A timed verdict's
speedup is then one measurement shared by the copies.

`training_verify_config` is the one place RL picks the verifier settings of its rewards.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..tasks.task import Task
from .extract import extract_code
from .verdict import Verdict

SHARED_NOTE = "verified once for identical code in the same batch"


def training_verify_config(cfg):
    """The verifier settings of RL's rewards, `VerifyConfig.for_training()`: the verdict's rules
    unchanged, timing (only ever for candidates already correct) with its own trial budget, a pool
    as wide as the host's cores. The tasks' training sizes are `rl.train_task_scale`
    (train/rl/reward_tasks.py). Evaluation never uses this."""
    return cfg.verify.for_training()


def dedupe_key(task: Task, completion: str) -> str:
    """What a verdict depends on besides the settings: the task and the code the verifier will see."""
    ex = extract_code(completion or "")
    code = ex.code if ex.code is not None else f"<no code>\0{completion}"
    h = hashlib.sha256()
    for part in (task.id, task.source, code):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class VerifyStats:
    candidates: int = 0
    unique: int = 0  # distinct (task, code) pairs: what the pool verified
    seconds: float = 0.0  # wall time of the pool's work (in the background: not time the caller waited)

    @property
    def duplicates(self) -> int:
        return self.candidates - self.unique

    def add(self, other: "VerifyStats") -> "VerifyStats":
        return VerifyStats(self.candidates + other.candidates, self.unique + other.unique,
                           self.seconds + other.seconds)

    def to_dict(self) -> dict[str, Any]:
        per_min = (lambda n: round(60 * n / self.seconds, 1) if self.seconds > 0 else None)
        return {"candidates": self.candidates, "unique": self.unique, "duplicates": self.duplicates,
                "seconds": round(self.seconds, 3), "per_minute": per_min(self.candidates),
                "unique_per_minute": per_min(self.unique)}


def verify_unique(pool, tasks: Sequence[Task], texts: Sequence[str], *, config=None, desc: str = "verify",
                  progress: bool | None = None) -> tuple[list[Verdict], VerifyStats]:
    """One verdict per (task, completion), verifying each distinct (task, code) once."""
    if len(tasks) != len(texts):
        raise ValueError(f"{len(tasks)} tasks for {len(texts)} completions")
    first: dict[str, int] = {}
    owner: list[int] = []
    for i, (task, text) in enumerate(zip(tasks, texts)):
        owner.append(first.setdefault(dedupe_key(task, text), i))
    todo = sorted(set(owner))
    t0 = time.perf_counter()
    kwargs: dict[str, Any] = {"desc": desc}
    if config is not None:
        kwargs["config"] = config
    if progress is not None:
        kwargs["progress"] = progress
    got = pool.map([tasks[i] for i in todo], [texts[i] for i in todo], **kwargs) if todo else []
    seconds = time.perf_counter() - t0
    by_index = dict(zip(todo, got))
    out: list[Verdict] = []
    for i, o in enumerate(owner):
        v = by_index[o]
        if o != i:  # a copy, so a later edit of one verdict never changes another
            v = Verdict.from_dict(v.to_dict())
            v.notes = [*v.notes, SHARED_NOTE]
        out.append(v)
    return out, VerifyStats(len(texts), len(todo), seconds)


class VerifyAhead:
    """Verification in one background thread, so the next batch can generate meanwhile. The pool
    runs one `map` at a time, so batches are verified in the order they were submitted."""

    def __init__(self, pool, config=None):
        self.pool, self.config = pool, config
        self._exec = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-ahead")

    def submit(self, tasks: Sequence[Task], texts: Sequence[str], desc: str = "verify"):
        """A Future of `(verdicts, VerifyStats)`."""
        return self._exec.submit(verify_unique, self.pool, list(tasks), list(texts), config=self.config, desc=desc,
                                 progress=False)

    def close(self, drop_queued: bool = False) -> None:
        """Stop the thread after the batch it is verifying; the batches queued behind it too, or
        (`drop_queued`, after an error or an interrupt) not. The running batch is always waited
        for: closing the pool under a running `map` would leave it starting workers."""
        self._exec.shutdown(wait=True, cancel_futures=drop_queued)

    def __enter__(self) -> "VerifyAhead":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(drop_queued=exc_type is not None)
