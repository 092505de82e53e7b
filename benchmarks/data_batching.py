"""What batching costs the data stage: a corpus's real verification times replayed through the pool's order.

The data stage (data/generate.py) verifies candidates in batches through a VerifierPool: each worker takes the
next candidate when it is free, and a batch ends when its last candidate does, so the other workers idle
through each batch's slowest candidate (a convolution under the Triton interpreter takes up to 72 s, the median
0.65 s). This replays the durations a corpus's verdict cache recorded (`duration_s` of every verdict, in a
fixed shuffled order) for several worker counts and two batch policies:

- `16 per worker`: the data stage's batches until the twentieth session (16 x workers candidates a batch);
- `all at once`: what it does now (`generate.verify_batch`: everything still needed, and an eighth more);
- `ideal`: the total divided among the workers, no idling at all.

It is a model of the pool, not a measurement of it. The check: on the 64-core host of the twentieth session
(62 workers) the data stage's verification took 366 s with `16 per worker`; this replay of the durations a
2-core build of the corpus before it recorded (the same 92 families) gives 345 s there.

    python benchmarks/data_batching.py /tmp/gs/cache/verdicts [--workers 2 14 62] [--seed 0]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tritonrl_lib.data.generate import verify_batch  # noqa: E402


def durations(cache: Path) -> list[float]:
    """Every verdict's `duration_s` under a verdict cache folder (verify/cache.py's JSON files)."""
    out = []
    for f in sorted(cache.rglob("*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and isinstance(d.get("duration_s"), (int, float)):
            out.append(float(d["duration_s"]))
    return out


def replay(times: list[float], workers: int, batch: int) -> float:
    """Wall seconds for `times` in order on `workers` that each take the next job when free, in batches of
    `batch` that each start when the one before has ended."""
    if workers < 1 or batch < 1:
        raise ValueError(f"workers and batch must be at least 1, got {workers} and {batch}")
    clock = 0.0
    for start in range(0, len(times), batch):
        free = [clock] * workers
        end = clock
        for t in times[start:start + batch]:
            began = heapq.heappop(free)
            heapq.heappush(free, began + t)
            end = max(end, began + t)
        clock = end
    return clock


def table(times: list[float], worker_counts: list[int]) -> list[str]:
    rows = ["| workers | ideal (s) | 16 per worker (s) | all at once (s) | all at once saves |",
            "|---:|---:|---:|---:|---:|"]
    for w in worker_counts:
        before = replay(times, w, 16 * w)
        now = replay(times, w, verify_batch(len(times), w))
        rows.append(f"| {w} | {sum(times) / w:.0f} | {before:.0f} | {now:.0f} | {100 * (1 - now / before):.0f}% |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", type=Path, help="a verdict cache folder (a data stage's RUN/cache/verdicts)")
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 14, 62])
    ap.add_argument("--seed", type=int, default=0, help="the shuffle of the candidates' order")
    args = ap.parse_args(argv)
    if not args.cache.is_dir():
        ap.error(f"{args.cache} is not a folder: give a verdict cache, e.g. RUN/cache/verdicts")
    times = durations(args.cache)
    if not times:
        ap.error(f"no verdicts with a duration under {args.cache}")
    random.Random(args.seed).shuffle(times)
    ordered = sorted(times)
    print(f"{len(times)} verdicts, {sum(times):.0f} s of verification; median {ordered[len(times) // 2]:.2f} s, "
          f"slowest {ordered[-1]:.1f} s")
    print("\n".join(table(times, args.workers)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
