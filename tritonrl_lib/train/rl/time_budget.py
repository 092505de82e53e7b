"""RL's time budget (`rl_time_budget_s`): a call starts no best-of-N round or GRPO step that would end past
the budget, judged by the longest round or step this call has taken so far; the first always runs.

Why: a round's length is set by its slowest verdicts (on KernelBench's train part, 92-300 s on an H200
where the built-in suite's took 70-175 s), so a fixed count of rounds does not say when a run ends. With a
device lent for a fixed time, a run cut by the lender loses the step under way and, for GRPO, the adapter
(GRPO saves it at the end). Under a budget the run stops between steps with the adapter of the last
finished one in checkpoints/rl (GRPO also saves its Trainer checkpoint there), its marker saying so, and
running it again goes on from there with a budget of its own: the budget counts per call and is not part
of the run's fingerprint (run_frame.fingerprint), so it changes when a run stops, never what a step does.

With several processes rank 0 decides (`Ranks.from_main`), so every rank stops after the same step.
"""

from __future__ import annotations

import time
from typing import Callable

STOPPED = "time_budget"  # the adapter marker's `stopped`, and the RLResult status, of a run the budget ended


class StepBudget:
    def __init__(self, budget_s: float, ranks, start: float | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.budget_s = max(0.0, float(budget_s or 0.0))
        self.ranks = ranks
        self.clock = clock
        self.t0 = clock() if start is None else start  # the call's start: model loading counts too
        self._last = clock()
        self.longest = 0.0  # the longest round or step of this call

    @property
    def active(self) -> bool:
        return self.budget_s > 0

    def step_done(self, counts: bool = True) -> None:
        """A round or step has ended: its length counts towards the estimate of the next, unless it
        did not do a round's work (`counts` False: a resumed round read back from disk, only trained)."""
        now = self.clock()
        if counts:
            self.longest = max(self.longest, now - self._last)
        self._last = now

    def another_fits(self) -> bool:
        """Whether one more round or step, as long as the longest yet, ends within the budget (the
        same answer on every rank: rank 0's)."""
        if not self.active:
            return True
        return bool(self.ranks.from_main(lambda: self.spent() + self.longest <= self.budget_s))

    def spent(self) -> float:
        return self.clock() - self.t0

    def words(self, done: int, total: int, unit: str) -> str:
        return (f"time budget: {self.spent():.0f} s of {self.budget_s:.0f} s spent and the longest {unit[:-1]} took "
                f"{self.longest:.0f} s, so the run stops after {done} of {total} {unit}; the adapter in checkpoints/rl "
                f"is the last {unit[:-1]}'s; run it again to go on")


def stopped_after(marker: object) -> str | None:
    """"N rounds" / "N steps" where an RL adapter's marker says the time budget stopped its run; else None."""
    if not isinstance(marker, dict) or marker.get("stopped") != STOPPED:
        return None
    if marker.get("method") == "grpo":
        return f"{int(marker.get('steps', 0))} steps"
    return f"{int(marker.get('round', -1)) + 1} rounds"
