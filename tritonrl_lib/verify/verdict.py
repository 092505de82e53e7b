"""The Verdict contract: one per candidate, always, whatever the candidate did. Plain JSON-able data."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# The funnel, in order. `stage` on a Verdict is the LAST stage the candidate passed;
# "none" means not even code extraction succeeded.
STAGES = ("none", "extract", "static", "compile", "tiny", "full", "timing")


def stage_index(stage: str) -> int:
    return STAGES.index(stage)


def passed(verdict_stage: str, stage: str) -> bool:
    """Did a candidate whose last passed stage is `verdict_stage` get through `stage`?"""
    return stage_index(verdict_stage) >= stage_index(stage)


@dataclass
class Verdict:
    task_id: str = ""
    stage: str = "none"  # last stage passed, one of STAGES
    correct: bool = False  # passed `full` (every input variation) with no cheat flag
    reason: str = ""  # machine-readable, from the catalogue in reasons.py: "ok", "mismatch:<input set>", ...
    reward: float = 0.0
    error: str = ""  # excerpt of the error or traceback, for people
    errors: list[dict[str, Any]] = field(default_factory=list)  # per input variation: name, ok, max_abs, max_rel, ...
    cheat_flags: list[str] = field(default_factory=list)
    ref_time_ms: float | None = None
    kernel_time_ms: float | None = None
    speedup: float | None = None
    timing: dict[str, Any] | None = None  # trimmed mean, median, spread of both sides
    review: bool = False  # flagged for a person to look at (e.g. speedup above the review threshold)
    notes: list[str] = field(default_factory=list)  # e.g. "timing skipped: no GPU"
    duration_s: float = 0.0
    # where that time went: reference, compile, tiny, full, timing (seconds from the end of the one
    # before, in the candidate's process), and worker_s (the worker's own share: comparing, hashing)
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def clip_error(text: str, limit: int) -> str:
    """A long error kept as its first line (where it happened: "runtime_error on the original inputs")
    and its end (the exception itself: the last lines of a traceback), not its middle."""
    if len(text) <= limit:
        return text
    head = text.split("\n", 1)[0][: limit // 4]
    return f"{head}\n...\n{text[-(limit - len(head) - 5):]}"
