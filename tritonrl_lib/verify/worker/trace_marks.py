"""A candidate's trace (TRITONRL_TRACE, benchmarks/verifier.py --trace): the points its run reached, kept in
the verdict's phases for people, never for the verdict. Keys: `@label` when (the machine's monotonic clock),
`%label` the GPU lock wait of its process until then, `$label` the CPU time it had used (its own and its
reaped children's), `|s3` / `|s3~` when its fourth GPU lock hold, shared ("s") or alone ("a"), began / ended."""

from __future__ import annotations

import time
from typing import Any

MAX_MARKS = 100  # trace points kept per candidate


def add_mark(trace: dict[str, float], label: str, t: Any = None, lock_wait: Any = None, cpu: Any = None) -> None:
    if sum(1 for k in trace if k[0] != "|") >= 3 * MAX_MARKS:
        return
    trace[f"@{label}"] = round(float(t), 4) if isinstance(t, (int, float)) else round(time.monotonic(), 4)
    if isinstance(lock_wait, (int, float)):
        trace[f"%{label}"] = round(float(lock_wait), 4)
    if isinstance(cpu, (int, float)):
        trace[f"${label}"] = round(float(cpu), 3)


def add_holds(trace: dict[str, float], holds: list[Any]) -> None:
    for k, h in enumerate(holds[:60]):
        if isinstance(h, list) and len(h) == 3 and all(isinstance(x, (int, float)) for x in h[1:]):
            mode = "a" if h[0] == "alone" else "s"
            trace[f"|{mode}{k}"] = round(float(h[1]), 4)
            trace[f"|{mode}{k}~"] = round(float(h[2]), 4)
