"""Numbers as the runner and the report print them."""

from __future__ import annotations

import math


def duration(seconds: float) -> str:
    """A wall-clock span: "8m 05s" from a minute on, "42.3s" under one, "?" when not a number."""
    if not math.isfinite(seconds):
        return "?"
    seconds = max(0.0, seconds)
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m {s:02d}s" if m else f"{seconds:.1f}s"
