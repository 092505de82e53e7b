"""Where a GPU verdict's time goes: the benchmark's correct candidates through a one-worker pool
under settings that switch stages off one at a time, plus the bare cost of a CUDA context.

    python benchmarks/verifier_profile.py --out DIR      # on a GPU machine; writes DIR/verifier_profile.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verifier import CORRECT, load_tasks  # noqa: E402

from tritonrl_lib.core.config import VerifyConfig  # noqa: E402
from tritonrl_lib.verify import VerifierPool  # noqa: E402

CONFIGS = {
    "default": {},
    "no_prestart": {"prestart_child": "off"},
    "no_timing": {"timing": "off"},
    "no_timing_1_variation": {"timing": "off", "num_variations": 1},
}


def bare_cuda_seconds() -> dict:
    from process_costs import start_seconds

    bare = start_seconds("cuda")
    return {"import_torch_s": bare["import_torch_s"], "cuda_context_s": bare["first_tensor_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=6, help="correct candidates per configuration")
    ap.add_argument("--cprofile", action="store_true",
                    help="the default configuration only, every candidate's process under "
                         "cProfile; summaries in OUT/cprofile.txt")
    args = ap.parse_args()
    tasks = load_tasks("medium")
    names = CORRECT[: args.n]
    if args.cprofile:
        return cprofile_run(tasks, names, Path(args.out))
    result = {"bare": bare_cuda_seconds(), "candidates": names, "configs": {}}
    print(result["bare"], flush=True)
    for label, over in CONFIGS.items():
        cfg = dataclasses.replace(VerifyConfig(), **over)
        t0 = time.perf_counter()
        with VerifierPool(cfg, workers=1, progress=False) as pool:
            start = time.perf_counter() - t0
            rows = []
            for n in names:  # one at a time: per-candidate seconds without queueing
                t = time.perf_counter()
                v = pool.map([tasks[n]], [tasks[n].reference_solution])[0]
                rows.append({"task": n, "wall_s": round(time.perf_counter() - t, 3), "duration_s": v.duration_s,
                             "stage": v.stage, "reason": v.reason, "notes": v.notes, "phases": v.phases,
                             "timing": {k: v.timing[k] for k in list(v.timing)[:12]} if v.timing else None})
        result["configs"][label] = {"pool_start_s": round(start, 3), "rows": rows}
        print(label, f"start {start:.2f}s", [(r["task"], r["wall_s"]) for r in rows], flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "verifier_profile.json").write_text(json.dumps(result, indent=1, default=str))


def cprofile_run(tasks: dict, names: list[str], out: Path) -> None:
    import io
    import os
    import pstats

    folder = out.resolve() / "prof"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TRITONRL_PROFILE_DIR"] = str(folder)  # the workers and their children inherit it
    with VerifierPool(VerifyConfig(), workers=1, progress=False) as pool:
        for n in names:
            v = pool.map([tasks[n]], [tasks[n].reference_solution])[0]
            print(n, v.reason, v.phases, flush=True)
    report = io.StringIO()
    for prof in sorted(folder.glob("*.prof"), key=lambda p: p.stat().st_mtime):
        report.write(f"\n===== {prof.name}\n")
        try:
            pstats.Stats(str(prof), stream=report).strip_dirs().sort_stats("cumulative").print_stats(45)
        except Exception as e:  # a process killed while writing its profile
            report.write(f"unreadable: {e}\n")
    (out / "cprofile.txt").write_text(report.getvalue())


if __name__ == "__main__":
    main()
