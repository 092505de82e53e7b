"""The reward ladder (the source's): a rung for the last stage passed, a speed bonus after timing.

    failed extract/static/compile  0
    passed compile                 0.3 * partial_credit
    passed tiny                    0.5 * partial_credit
    passed full (no timing: CPU)   0.7
    passed timing                  0.7 + 0.3 * min(speedup / 2, 1)
    any cheat flag                 0
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RewardLadder:
    compile: float = 0.3
    tiny: float = 0.5
    full: float = 0.7
    speed_weight: float = 0.3
    speed_target: float = 2.0  # the speedup that earns the whole speed bonus


DEFAULT_LADDER = RewardLadder()


def compute_reward(stage: str, cheat_flags: list[str] | tuple[str, ...] = (), speedup: float | None = None,
                   partial_credit: float = 1.0, ladder: RewardLadder = DEFAULT_LADDER) -> float:
    """Reward of a candidate whose last passed stage is `stage` (see verdict.STAGES)."""
    if cheat_flags:
        return 0.0
    if stage == "timing":
        bonus = 0.0
        if speedup is not None and math.isfinite(speedup) and speedup > 0:
            bonus = ladder.speed_weight * min(speedup / ladder.speed_target, 1.0)
        elif speedup is not None and math.isinf(speedup) and speedup > 0:
            bonus = ladder.speed_weight
        return round(ladder.full + bonus, 6)
    if stage == "full":
        return ladder.full
    if stage == "tiny":
        return round(ladder.tiny * partial_credit, 6)
    if stage == "compile":
        return round(ladder.compile * partial_credit, 6)
    return 0.0
