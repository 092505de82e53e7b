"""Adaptive Level-1 -> Level-2 task mixing (the source's curriculum), deterministic and resumable.

The probability of drawing a Level-2 task, `p_level2`, starts at `curriculum_start_p`. It stays
there until the *running Level-1 correct rate* passes `curriculum_trigger`; from the step after,
it ramps linearly to `curriculum_end_p` over `curriculum_ramp_steps` steps and stays there. Once
triggered, the ramp never goes back: a bad round does not undo the schedule.

Definitions (what the log and the report mean by them):

- A *step* is one curriculum update: one best-of-N round, or one GRPO generation batch.
- The *running Level-1 correct rate* is an exponential moving average over steps of each step's
  Level-1 correct rate (correct Level-1 samples / Level-1 samples in that step):
  `r <- x` at the first step with Level-1 samples, then `r <- (1 - a) * r + a * x` with
  `a = ema_weight` (0.5: the latest step weighs as much as all earlier ones together). A step
  without Level-1 samples leaves `r` unchanged.
- *Passes* means strictly greater: `r > curriculum_trigger`. `triggered_at` is the step whose
  update first made it so.
- `p_level2` of step `s` (the probability used to *draw* step `s`'s tasks) is `start_p` before the
  trigger and `start_p + (end_p - start_p) * min(1, (s - triggered_at) / ramp_steps)` after it
  (`ramp_steps = 0` jumps straight to `end_p`). It always lies between start_p and end_p.
- Levels: the Level-1 side is tasks of level 1; the Level-2 side is every task of level >= 2
  (the built-in suite has levels 1 and 2; KernelBench's Level-3 architectures join the hard side).
  When one side has no tasks, every draw goes to the other side and the log says so.

The frontier (`frontier=True`, the setting `curriculum_frontier`): which tasks of a side are drawn.
Each task keeps decayed counts of its recent samples, `s` correct and `f` not, updated whenever it
is drawn: `s <- decay * s + correct`, `f <- decay * f + wrong` (`frontier_decay`: the weight of a
task's earlier attempts against its latest). Its success estimate is `p = (s + 0.5) / (s + f + 1)`
(0.5 before any attempt), and it is drawn with weight `p * (1 - p) + frontier_floor`: tasks the
policy sometimes solves (where samples differ, and so groups carry a learning signal) most, tasks
never tried as much, tasks always or never solved least but never not at all. Draws within a side
are weighted and without replacement. Without the frontier, tasks of a side are drawn uniformly.
The per-task counts are rebuilt from the log on a resume (each record keeps `task_results`).

Redraws (dynamic sampling: a group that carried no signal is replaced): `redraw` draws more tasks
for the open step, by the same rules, avoiding the step's tasks where the side has others.

Randomness: step `s`'s draws use `random.Random(f"{seed}:curriculum:{s}")`, so a run resumed at
step `s` draws exactly what the uninterrupted run drew, with no RNG state to save.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypeVar

from ...core.config import RLConfig
from ...core.jsonio import append_jsonl, read_jsonl, write_jsonl

T = TypeVar("T")

LEVEL1 = 1
LEVEL2 = 2


def side_of(level: int) -> int:
    """1 for Level-1 tasks, 2 for every harder level (the curriculum's two sides)."""
    return LEVEL1 if int(level) <= 1 else LEVEL2


@dataclass(frozen=True)
class CurriculumSettings:
    start_p: float = 0.1
    end_p: float = 0.5
    trigger: float = 0.4
    ramp_steps: int = 10
    ema_weight: float = 0.5
    frontier: bool = False
    frontier_decay: float = 0.7
    frontier_floor: float = 0.05

    def __post_init__(self) -> None:
        for name in ("start_p", "end_p", "trigger"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"curriculum {name}={v} must lie between 0 and 1")
        if self.ramp_steps < 0:
            raise ValueError(f"curriculum_ramp_steps={self.ramp_steps} must be 0 or more")
        if not 0.0 < self.ema_weight <= 1.0:
            raise ValueError(f"curriculum ema_weight={self.ema_weight} must lie in (0, 1]")
        if not 0.0 <= self.frontier_decay <= 1.0 or self.frontier_floor <= 0:
            raise ValueError(f"curriculum frontier_decay={self.frontier_decay} must lie in [0, 1] and "
                             f"frontier_floor={self.frontier_floor} must be positive")

    @classmethod
    def from_config(cls, rl: RLConfig) -> "CurriculumSettings":
        return cls(start_p=rl.curriculum_start_p, end_p=rl.curriculum_end_p, trigger=rl.curriculum_trigger,
                   ramp_steps=rl.curriculum_ramp_steps, frontier=rl.curriculum_frontier)


# --------------------------------------------------------------------------- the schedule (pure)


def p_level2_at(step: int, triggered_at: int | None, s: CurriculumSettings) -> float:
    """P(Level 2) used to draw step `step`, given the step whose update fired the trigger."""
    if triggered_at is None or step <= triggered_at:
        return s.start_p
    frac = 1.0 if s.ramp_steps == 0 else min(1.0, (step - triggered_at) / s.ramp_steps)
    p = s.start_p + (s.end_p - s.start_p) * frac
    lo, hi = min(s.start_p, s.end_p), max(s.start_p, s.end_p)
    return min(hi, max(lo, p))  # guard against float drift past the end


def update_running_rate(previous: float | None, step_rate: float | None, ema_weight: float) -> float | None:
    """The EMA update; `step_rate=None` (no Level-1 samples this step) keeps the previous value."""
    if step_rate is None:
        return previous
    if previous is None:
        return step_rate
    return (1.0 - ema_weight) * previous + ema_weight * step_rate


def step_rng(seed: int, step: int) -> random.Random:
    return random.Random(f"{seed}:curriculum:{step}")


def success_estimate(correct: float, wrong: float) -> float:
    """A task's recent success rate from its decayed counts (0.5 before any attempt)."""
    return (correct + 0.5) / (correct + wrong + 1.0)


def frontier_weight(correct: float, wrong: float, floor: float) -> float:
    p = success_estimate(correct, wrong)
    return p * (1.0 - p) + floor


def _item_id(item: Any) -> str:
    return str(getattr(item, "id", item))


def weighted_without_replacement(items: Sequence[T], weights: Sequence[float], n: int,
                                 rng: random.Random) -> list[T]:
    """`n` distinct items (all of them when n >= len), each draw proportional to its weight
    (Efraimidis-Spirakis keys u ** (1 / w)); order: the draw order."""
    keyed = sorted(((rng.random() ** (1.0 / w), i) for i, w in enumerate(weights)), reverse=True)
    return [items[i] for _, i in keyed[:n]]


# --------------------------------------------------------------------------- state and log


@dataclass
class CurriculumState:
    step: int = 0  # the next step to be drawn
    running_l1_rate: float | None = None
    triggered_at: int | None = None


@dataclass
class StepRecord:
    """One line of the curriculum log: what step `step` drew and what it observed."""

    step: int
    p_level2: float  # the probability this step's tasks were drawn with
    n_level1: int  # tasks drawn per side
    n_level2: int
    l1_samples: int  # verified samples per side and their correct counts
    l1_correct: int
    l2_samples: int
    l2_correct: int
    step_l1_rate: float | None
    running_l1_rate: float | None  # after this step's update
    triggered_at: int | None
    fallback: str = ""  # "no level-2 tasks" / "no level-1 tasks" when one side was empty
    extra: dict[str, Any] = field(default_factory=dict)
    task_results: dict[str, list[int]] = field(default_factory=dict)  # task id -> [samples, correct]
    redrawn: int = 0  # tasks drawn again for this step (dynamic sampling)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Curriculum:
    """The schedule's state plus its draws; `update` closes a step and appends it to the log."""

    def __init__(self, settings: CurriculumSettings, seed: int = 0, log_path: str | Path | None = None,
                 state: CurriculumState | None = None):
        self.settings = settings
        self.seed = seed
        self.log_path = Path(log_path) if log_path is not None else None
        self.state = state or CurriculumState()
        self._drawn: tuple[int, int, str] | None = None  # (n_level1, n_level2, fallback) of the open step
        self._redrawn = 0
        self.task_counts: dict[str, list[float]] = {}  # task id -> [decayed correct, decayed wrong]

    @classmethod
    def from_config(cls, cfg, log_path: str | Path | None = None) -> "Curriculum":
        """The run's curriculum (RunConfig), continuing from its log when one exists."""
        return cls.resume(CurriculumSettings.from_config(cfg.rl), cfg.seed, log_path)

    # -- the schedule ------------------------------------------------------------------

    @property
    def step(self) -> int:
        return self.state.step

    @property
    def p_level2(self) -> float:
        return p_level2_at(self.state.step, self.state.triggered_at, self.settings)

    def rng(self, step: int | None = None) -> random.Random:
        return step_rng(self.seed, self.state.step if step is None else step)

    # -- draws ------------------------------------------------------------------------

    def sample_levels(self, n: int, rng: random.Random | None = None,
                      available: Iterable[int] = (LEVEL1, LEVEL2)) -> list[int]:
        """`n` sides (1 or 2), each Level 2 with probability p_level2; an empty side is never drawn."""
        rng = rng or self.rng()
        have = {side_of(x) for x in available}
        if not have:
            raise ValueError("no tasks on either curriculum side: the task pool is empty")
        p = self.p_level2
        levels = [LEVEL2 if rng.random() < p else LEVEL1 for _ in range(n)]
        if have == {LEVEL1}:
            levels = [LEVEL1] * n
        elif have == {LEVEL2}:
            levels = [LEVEL2] * n
        return levels

    def sample_tasks(self, pool_by_level: Mapping[int, Sequence[T]], n: int,
                     rng: random.Random | None = None) -> list[T]:
        """`n` tasks: a side per slot from `sample_levels`, then tasks of that side without
        replacement (a side's pool is reshuffled and reused only when the step needs more tasks
        than it holds). Records the draw for this step's `update`."""
        if n < 1:
            raise ValueError(f"sample_tasks needs n >= 1, got {n}")
        rng = rng or self.rng()
        sides: dict[int, list[T]] = {LEVEL1: [], LEVEL2: []}
        for level in sorted(pool_by_level):
            sides[side_of(level)].extend(pool_by_level[level])
        available = [s for s, items in sides.items() if items]
        if not available:
            raise ValueError("sample_tasks: the task pool is empty (no tasks at any level); "
                             "check rl_tasks and the data split")
        levels = self.sample_levels(n, rng, available)
        fallback = ""
        if LEVEL2 not in available:
            fallback = "no level-2 tasks"
        elif LEVEL1 not in available:
            fallback = "no level-1 tasks"
        out = self._fill(sides, levels, rng, avoid=())
        self._drawn = (levels.count(LEVEL1), levels.count(LEVEL2), fallback)
        self._redrawn = 0
        return out

    def redraw(self, pool_by_level: Mapping[int, Sequence[T]], n: int, avoid: Iterable[str] = (),
               rng: random.Random | None = None) -> list[T]:
        """`n` more tasks for the open step (groups that carried no signal are replaced), by the
        same side and frontier rules, avoiding the task ids `avoid` where a side has others."""
        if n < 1:
            return []
        rng = rng or random.Random(f"{self.seed}:curriculum:{self.state.step}:redraw:{self._redrawn}")
        sides: dict[int, list[T]] = {LEVEL1: [], LEVEL2: []}
        for level in sorted(pool_by_level):
            sides[side_of(level)].extend(pool_by_level[level])
        available = [s for s, items in sides.items() if items]
        if not available:
            raise ValueError("redraw: the task pool is empty")
        out = self._fill(sides, self.sample_levels(n, rng, available), rng, avoid=set(avoid))
        self._redrawn += len(out)
        return out

    def _fill(self, sides: dict[int, list[T]], levels: list[int], rng: random.Random, avoid) -> list[T]:
        """One task per entry of `levels`, without replacement within a side until it runs out
        (then its pool is drawn again); by the frontier's weights when it is on."""
        out: list[T] = []
        queues: dict[int, list[T]] = {}
        for side in levels:
            if not queues.get(side):
                pool = list(sides[side])
                fresh = [t for t in pool if _item_id(t) not in avoid]
                pool = fresh or pool
                if self.settings.frontier:
                    weights = [frontier_weight(*self.task_counts.get(_item_id(t), (0.0, 0.0)),
                                               self.settings.frontier_floor) for t in pool]
                    queue = weighted_without_replacement(pool, weights, len(pool), rng)[::-1]
                else:
                    queue = pool
                    rng.shuffle(queue)
                queues[side] = queue
            out.append(queues[side].pop())
        return out

    def count_redrawn(self, n: int) -> None:
        """Record `n` redrawn tasks for the open step without drawing them (a resumed step whose
        draws are on disk)."""
        self._redrawn += max(0, int(n))

    def task_success(self, task_id: str) -> float:
        """The frontier's recent-success estimate of a task (0.5 before any attempt)."""
        return success_estimate(*self.task_counts.get(task_id, (0.0, 0.0)))

    def _observe(self, task_results: Mapping[str, Sequence[int]]) -> None:
        d = self.settings.frontier_decay
        for tid, (n, correct) in task_results.items():
            c = self.task_counts.setdefault(tid, [0.0, 0.0])
            c[0] = d * c[0] + correct
            c[1] = d * c[1] + (n - correct)

    # -- updates ----------------------------------------------------------------------

    def update(self, results: Iterable[tuple[int, bool]], task_results: Mapping[str, Sequence[int]] | None = None,
               **extra: Any) -> StepRecord:
        """Close the current step with its verified samples `(task level, correct)` and, for the
        frontier, per task `{task id: (samples, correct)}`; append the step's record to the log and
        advance to the next step."""
        results = list(results)
        task_results = {k: [int(v[0]), int(v[1])] for k, v in (task_results or {}).items()}
        l1 = [bool(c) for lvl, c in results if side_of(lvl) == LEVEL1]
        l2 = [bool(c) for lvl, c in results if side_of(lvl) == LEVEL2]
        step_rate = (sum(l1) / len(l1)) if l1 else None
        st = self.state
        p_used = self.p_level2
        running = update_running_rate(st.running_l1_rate, step_rate, self.settings.ema_weight)
        triggered_at = st.triggered_at
        if triggered_at is None and running is not None and running > self.settings.trigger:
            triggered_at = st.step
        n1, n2, fallback = self._drawn if self._drawn is not None else (0, 0, "")
        record = StepRecord(step=st.step, p_level2=p_used, n_level1=n1, n_level2=n2,
                            l1_samples=len(l1), l1_correct=sum(l1), l2_samples=len(l2), l2_correct=sum(l2),
                            step_l1_rate=step_rate, running_l1_rate=running, triggered_at=triggered_at,
                            fallback=fallback, extra=dict(extra), task_results=task_results,
                            redrawn=self._redrawn)
        self._observe(task_results)
        self.state = CurriculumState(step=st.step + 1, running_l1_rate=running, triggered_at=triggered_at)
        self._drawn = None
        self._redrawn = 0
        if self.log_path is not None:
            append_jsonl(self.log_path, record.to_dict())
        return record

    # -- resuming ---------------------------------------------------------------------

    @classmethod
    def resume(cls, settings: CurriculumSettings, seed: int, log_path: str | Path | None,
               upto_step: int | None = None) -> "Curriculum":
        """The curriculum as it stood after the logged steps `< upto_step` (all when None).

        Records at or after `upto_step` (a step that was logged but whose round did not finish)
        are cut from the log, so the re-run step is logged once. A torn last line (a kill while
        appending; jsonio's policy) is dropped the same way: the log is rewritten with what is kept.
        """
        cur = cls(settings, seed, log_path)
        if log_path is None or not Path(log_path).is_file():
            return cur
        path = Path(log_path)
        kept: list[dict[str, Any]] = []
        for rec in read_jsonl(path):
            if upto_step is not None and rec["step"] >= upto_step:
                break
            if rec["step"] != len(kept):
                raise ValueError(f"{path}: curriculum log out of order at step {rec['step']} "
                                 f"(expected {len(kept)}); delete it to restart the schedule")
            kept.append(rec)
            cur._observe(rec.get("task_results") or {})
        if kept:
            last = kept[-1]
            cur.state = CurriculumState(step=last["step"] + 1, running_l1_rate=last["running_l1_rate"],
                                        triggered_at=last["triggered_at"])
        write_jsonl(path, kept)  # the next step is appended after a whole last line
        return cur


def read_curriculum_log(path: str | Path) -> list[dict[str, Any]]:
    """The log's records (for plots and the report); a missing log is an empty list."""
    return read_jsonl(path)


def schedule_preview(settings: CurriculumSettings, l1_rates: Sequence[float | None]) -> list[float]:
    """p_level2 for each step if the steps' Level-1 rates were `l1_rates` (for docs and plots)."""
    cur = Curriculum(settings)
    out = []
    for rate in l1_rates:
        out.append(cur.p_level2)
        results = [] if rate is None else [(1, True)] * round(rate * 1000) + [(1, False)] * (1000 - round(rate * 1000))
        cur.update(results)
    return out


__all__ = ["Curriculum", "CurriculumSettings", "CurriculumState", "StepRecord", "LEVEL1", "LEVEL2",
           "p_level2_at", "update_running_rate", "step_rng", "side_of", "read_curriculum_log",
           "schedule_preview", "success_estimate", "frontier_weight", "weighted_without_replacement"]
