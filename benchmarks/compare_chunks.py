"""How long the worker's tolerance comparison (compare.compare) takes for one large output, by the
number of elements compared at a time (compare._CHUNK) and comparison threads. Prints a table.

    .venv/bin/python benchmarks/compare_chunks.py [--n 8388608]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tritonrl_lib.verify.worker.compare as compare


def best_of(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8 << 20, help="elements in the output (default 8M)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| dtype | elements at a time | threads | ms |\n|---|---:|---:|---:|")
    for dtype in ("float32", "float16"):
        ref = rng.standard_normal(args.n).astype(dtype)
        cand = (ref + rng.standard_normal(args.n).astype(dtype) * 1e-4).astype(dtype)
        meta = {"kind": "tensor", "dtype": dtype, "shape": [args.n], "device": "cuda"}
        raw_ref, raw_cand = ref.tobytes(), cand.tobytes()
        for chunk in (1 << 22, 1 << 20, 1 << 18, 1 << 16):
            for threads in (1, 2, 4):
                compare._CHUNK, compare.COMPARE_THREADS, compare._POOL = chunk, threads, None
                s = best_of(lambda: compare.compare(meta, raw_ref, meta, raw_cand, 1e-2, 1e-2))
                print(f"| {dtype} | 2^{chunk.bit_length() - 1} | {threads} | {s * 1000:.1f} |", flush=True)


if __name__ == "__main__":
    main()
