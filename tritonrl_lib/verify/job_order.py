"""Which pending job a free verifier worker takes next: only the order of work changes, never a result
(the pool keeps results by index).

Two things decide it:

- **The reference phase a worker can skip.** A worker keeps the reference phase of the tasks it ran
  lately (reference_cache.py), and the pool can hand it a record another worker of its GPU made: such
  a job is cheaper for it than any other, so it goes first. A task no other worker ran lately comes
  next (whoever takes it runs its reference phase anyway), and only then another worker's task.
- **Jobs that need more than their share of the GPU go last.** A job whose task is too large for a
  worker's share asks for as many shares as it needs, or the GPU alone (limits.Budget.exclusive and
  shares): nothing more is handed out on that GPU until the jobs running there leave them free
  (pool._grant_alone). Handed out among shared jobs, each such job first drains the GPU, its other
  workers idle while the longest running job ends, then runs with few or no others. 35 of the
  70 held-out KernelBench problems of the `gpu` profile are too large for a share of an H100 at its
  12 workers (their footprints' budgets), and in that evaluation on two H200s the pass slowed to one
  candidate every 10-40 s wherever their jobs came up, the shared jobs queued behind them waiting as
  well. Once any job of a task has asked (`alone`: the pool records it), that task's other jobs wait
  until no other work is left: the shared work runs in parallel first, then the large jobs together
  as their shares allow, and a pass cut off by its time limit leaves the large tasks unverified
  instead of half of every level.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Collection, Mapping, Sequence

AFFINITY_TASKS = 64  # tasks remembered per worker when choosing its next job


def next_job(pending: collections.deque, mine: collections.OrderedDict, theirs: Sequence[Mapping[str, Any]] = (),
             recorded: Callable[[dict[str, Any]], bool] = lambda job: False,
             alone: Collection[str] = ()) -> tuple[int, dict[str, Any], str | None]:
    """Take the next job off `pending` ((index, job, cache key) items) for a worker whose recent task
    sources are `mine` (updated here); `theirs`: the other workers' recent sources; `recorded`: whether
    the pool holds a job's reference record for this worker; `alone`: task sources known to need their
    GPU alone (their jobs wait while any other job is pending)."""
    order = [n for n, item in enumerate(pending) if item[1]["task_source"] not in alone] or range(len(pending))
    pick = next((n for n in order if pending[n][1]["task_source"] in mine or recorded(pending[n][1])), None)
    if pick is None:
        pick = next((n for n in order if not any(pending[n][1]["task_source"] in t for t in theirs)), order[0])
    item = pending[pick]
    del pending[pick]
    source = item[1]["task_source"]
    mine[source] = True  # the most recent of the tasks it ran
    mine.move_to_end(source)
    while len(mine) > AFFINITY_TASKS:
        mine.popitem(last=False)
    return item
