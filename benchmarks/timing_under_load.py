"""Timing stability with the machine's CPUs busy: the speedup of one pair (built-in `softmax` and its
reference solution, `full` sizes) measured 10 times with our timing, on an idle machine and with
one busy-looping process per core (a verifier's other workers compile on the CPU while one times).
Prints a table; GPU only.

    python benchmarks/timing_under_load.py [--pair softmax] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        x += 1


def measure(pair: str, repeats: int = 10) -> list[float]:
    import torch

    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify.candidate.timing import speedup_stats, time_pair
    from verifier import build_pair

    ref, new, inputs = build_pair(pair)
    cfg = VerifyConfig()
    out = []
    with torch.no_grad():
        for _ in range(repeats):
            t = time_pair(lambda: ref(*inputs), lambda: new(*inputs), cfg.timing_warmup, cfg.timing_trials)
            out.append(speedup_stats(t["ref"], t["cand"], cfg.timing_trim)["speedup"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="softmax")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    print("| CPUs | mean speedup | CV | min | max |\n|---|---:|---:|---:|---:|")
    for load in ("idle", "busy"):
        stop, hogs = mp.Event(), []
        if load == "busy":
            hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(os.cpu_count() or 1)]
            for h in hogs:
                h.start()
        try:
            xs = measure(args.pair)
            mean = statistics.fmean(xs)
            row = {"cpus": load, "speedups": xs, "mean": mean, "cv": statistics.pstdev(xs) / mean}
            rows.append(row)
            print(f"| {load} | {mean:.3f} | {row['cv']:.2%} | {min(xs):.3f} | {max(xs):.3f} |", flush=True)
        finally:
            stop.set()
            for h in hogs:
                h.join(timeout=5)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "timing_under_load.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
