"""What the compile check costs on the CPU: the built-in suite verified with and without it.

    python benchmarks/verifier_compile_check.py                      # off vs frontend, all 92 solutions
    python benchmarks/verifier_compile_check.py --modes off,frontend,full --limit 20

Each mode gets a fresh pool (2 workers by default); the suite runs once to start the workers and
warm them, then once measured. Reported per mode: wall time, CPU seconds of the workers and every
candidate process (user + system, from /proc, so other load on the machine does not count), and
the verdicts (all must be correct: the check must never fail a solution that compiles).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from verifier import tree_cpu_seconds  # noqa: E402


def measure(mode: str, tasks: list, workers: int) -> dict:
    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify import VerifierPool

    cfg = VerifyConfig()
    cfg.compile_check = mode  # read by the pool with getattr until VerifyConfig has the field
    codes = [t.reference_solution for t in tasks]
    with VerifierPool(cfg, workers=workers, cache=False, progress=False) as pool:
        pool.map(tasks, codes)  # start and warm the workers
        pids = [w.proc.pid for w in pool._slots if w is not None]
        cpu0, wall0 = tree_cpu_seconds(pids), time.perf_counter()
        verdicts = pool.map(tasks, codes, desc=mode)
        cpu, wall = tree_cpu_seconds(pids) - cpu0, time.perf_counter() - wall0
    wrong = [f"{t.id}: {v.reason}" for t, v in zip(tasks, verdicts) if not v.correct]
    launches = sum(int(n.split(":")[1].split()[0]) for v in verdicts for n in v.notes
                   if n.startswith("compile check:") and "distinct" in n)
    return {"mode": mode, "wall_s": wall, "cpu_s": cpu, "n": len(tasks), "wrong": wrong, "compiled": launches}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="off,frontend", help="comma-separated: off, frontend, full")
    ap.add_argument("--limit", type=int, default=0, help="only the first N tasks (0 = all)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)

    from tritonrl_lib.tasks import load_builtin

    tasks = load_builtin("small")
    if args.limit:
        tasks = tasks[:args.limit]
    rows = [measure(m, tasks, args.workers) for m in args.modes.split(",") if m]
    base = rows[0]
    print(f"\n{len(tasks)} built-in solutions (small sizes), {args.workers} workers, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| compile_check | wall (s) | CPU (s) | CPU / candidate (s) | vs first | launches compiled | all correct |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['cpu_s'] / r['n']:.3f} | "
              f"{r['cpu_s'] / base['cpu_s']:.2f}x | {r['compiled']} | {'yes' if not r['wrong'] else r['wrong'][:5]} |")
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
