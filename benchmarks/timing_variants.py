"""Which part of a timed call picks up a disturbance: the speedup of one pair (built-in `softmax`,
`full` sizes) measured four ways, one after another in each repeat so that a disturbance meets all
four: A as the verifier timed until the sixth GPU session; B queues a 0.2 ms GPU spin after the L2
flush (the host gets more time to issue the call before the start event: the verifier's timing
since, `timing.HEAD_START_CYCLES`); C records the end event on the stream right after the call and
synchronises after it (no host wake-up inside the time; blind to side streams); D both. Prints each variant's per-repeat speedups and CV; GPU only.

    python benchmarks/timing_variants.py [--repeats 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="softmax")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify.candidate.timing import speedup_stats, time_pair
    from verifier import build_pair

    ref, new, inputs = build_pair(args.pair)
    cfg = VerifyConfig()
    variants = {"A no head start": (0, False), "B head start": (400_000, False), "C end before sync": (0, True),
                "D both": (400_000, True)}
    got: dict = {k: [] for k in variants}
    with torch.no_grad():
        for _ in range(args.repeats):
            for name, (head, early) in variants.items():
                t = time_pair(lambda: ref(*inputs), lambda: new(*inputs), cfg.timing_warmup, cfg.timing_trials,
                              head_start_cycles=head, end_before_sync=early)
                st = speedup_stats(t["ref"], t["cand"], cfg.timing_trim)
                got[name].append((st["speedup"], st["reference"]["median_ms"], st["candidate"]["median_ms"]))
    for name, rows in got.items():
        xs = [r[0] for r in rows]
        cv = statistics.pstdev(xs) / statistics.fmean(xs)
        print(f"{name:18s} mean {statistics.fmean(xs):.3f} CV {cv:.2%} min {min(xs):.3f} max {max(xs):.3f}")
    print("per repeat (speedup; ref / cand median us):")
    for i in range(args.repeats):
        print(f"  {i:2d} " + " | ".join(f"{got[n][i][0]:.3f} {got[n][i][1]*1000:.0f}/{got[n][i][2]*1000:.0f}"
                                        for n in variants))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "timing_variants.json").write_text(json.dumps(got, indent=2))


if __name__ == "__main__":
    main()
