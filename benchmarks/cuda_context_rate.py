"""How fast a GPU host makes CUDA contexts, and what slows it: every candidate's process needs one
(the process is the verdict's isolation), so contexts per second bound the verifier's candidates
per minute. In the RL loop a context took 1.43 s with ~12 made at once (docs/PERFORMANCE.md), against
~0.14 s alone; this measures which neighbour makes the difference.

Each scenario starts its neighbours (processes that hold a context: idle, running a stream of tiny
kernels like token-by-token generation, or saturating the GPU with matmuls), then forks `--count`
children from a parent that imported torch (as a verifier worker forks its candidates), at most
`concurrency` at once, each creating its context (torch.cuda.init + a memory query) and exiting.

    python benchmarks/cuda_context_rate.py --out DIR      # DIR/cuda_context_rate.json, a table on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import torch

# name: (concurrency, {neighbour kind: how many})
SCENARIOS: dict[str, tuple[int, dict[str, int]]] = {
    "alone, one at a time": (1, {}),
    "alone, 4 at once": (4, {}),
    "alone, 12 at once": (12, {}),
    "24 idle contexts, 12 at once": (12, {"idle": 24}),
    "generation-like stream, 12 at once": (12, {"tiny": 1}),
    "generation-like stream, 4 at once": (4, {"tiny": 1}),
    "generation-like stream, 1 at a time": (1, {"tiny": 1}),
    "GPU saturated by matmuls, 12 at once": (12, {"matmul": 1}),
    "12 contexts running tiny kernels, 12 at once": (12, {"tiny": 12}),
    "stream + 24 idle, 12 at once": (12, {"tiny": 1, "idle": 24}),
}


def neighbour(kind: str, ready_w: int) -> None:
    """A process that holds a CUDA context and keeps doing `kind` until killed."""
    torch.cuda.set_device(0)
    x = torch.ones(1024, device="cuda")
    big = torch.ones(8192, 8192, device="cuda", dtype=torch.bfloat16) if kind == "matmul" else None
    torch.cuda.synchronize()
    os.write(ready_w, b"r")
    while True:
        if kind == "idle":
            time.sleep(3600)
        elif kind == "tiny":  # launch-bound, as a small model's token-by-token decoding is
            for _ in range(200):
                x.add_(1.0)
            torch.cuda.synchronize()
        else:
            for _ in range(4):
                big @ big
            torch.cuda.synchronize()


def fork_neighbours(kinds: dict[str, int]) -> list[int]:
    pids = []
    r, w = os.pipe()
    for kind, n in kinds.items():
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    neighbour(kind, w)
                finally:
                    os._exit(0)
            pids.append(pid)
    os.close(w)
    for _ in pids:
        os.read(r, 1)
    os.close(r)
    return pids


def creator(w: int) -> None:
    try:
        t0 = time.monotonic()
        torch.cuda.set_device(0)
        torch.cuda.init()
        torch.cuda.mem_get_info()
        os.write(w, f"{time.monotonic() - t0:.4f}\n".encode())
    finally:
        os._exit(0)


def measure(concurrency: int, count: int) -> dict:
    """Fork `count` context-creating children, at most `concurrency` alive at once."""
    r, w = os.pipe()
    alive: set[int] = set()
    started = 0
    t0 = time.monotonic()
    while started < count or alive:
        while started < count and len(alive) < concurrency:
            pid = os.fork()
            if pid == 0:
                os.close(r)
                creator(w)
            alive.add(pid)
            started += 1
        pid, _ = os.wait()
        alive.discard(pid)
    wall = time.monotonic() - t0
    os.close(w)
    with os.fdopen(r) as f:
        each = [float(x) for x in f.read().split()]
    if not each:
        raise RuntimeError("no child made a CUDA context (is there a GPU?)")
    return {"count": count, "concurrency": concurrency, "wall_s": round(wall, 3),
            "contexts_per_s": round(count / wall, 2), "mean_s": round(statistics.mean(each), 3),
            "median_s": round(statistics.median(each), 3), "max_s": round(max(each), 3), "reported": len(each)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=24, help="contexts made per scenario")
    ap.add_argument("--connections", type=int, default=2,
                    help="CUDA_DEVICE_MAX_CONNECTIONS for every process (the verifier's default is 2)")
    ap.add_argument("--only", default="", help="comma-separated scenario numbers (1-based) to run")
    a = ap.parse_args()
    if a.connections:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(a.connections)
    if torch.cuda.is_initialized():
        sys.exit("the parent must not hold a CUDA context (children are forked from it)")
    a.out.mkdir(parents=True, exist_ok=True)
    chosen = {int(x) for x in a.only.split(",") if x.strip()}
    rows = []
    for i, (name, (conc, kinds)) in enumerate(SCENARIOS.items(), 1):
        if chosen and i not in chosen:
            continue
        pids = fork_neighbours(kinds)
        time.sleep(0.5)
        try:
            row = {"scenario": name, "neighbours": kinds, **measure(conc, a.count)}
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            for pid in pids:
                os.waitpid(pid, 0)
        rows.append(row)
        print(f"{name:46s} {row['contexts_per_s']:6.2f}/s  mean {row['mean_s']:.3f} s  "
              f"median {row['median_s']:.3f}  max {row['max_s']:.3f}", flush=True)
        (a.out / "cuda_context_rate.json").write_text(json.dumps(
            {"cpus": os.cpu_count(),
             "connections": a.connections, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
