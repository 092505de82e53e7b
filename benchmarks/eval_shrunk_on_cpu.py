"""A cut-off evaluation's answers on held-out KernelBench, verified here on the CPU at shrunk sizes.

    python benchmarks/eval_shrunk_on_cpu.py ROOT --stage sft --level 2 -p kernelbench=/path/to/KernelBench [--profile gpu]

ROOT is a `gpu_rl_session.py` results folder as its export brings it back (`runs/base/data/` and
`eval/.eval_<stage>.resume-*/completions.json`). Each held-out KernelBench problem of the level is shrunk
(`kernelbench_common.shrink`, the sweep's --small) and every sample of the stage is verified against it by
the CPU pool under Triton's interpreter. What a GPU pass never reached then shows how its answers fail
(construction, compile, run time, shape): a reading of failure modes, never the benchmark's figure, whose
sizes are the published ones. Prints the verdicts by reason and writes them to --out.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval_from_verdicts import load_kept  # noqa: E402
from kernelbench_common import shrink  # noqa: E402
from tritonrl_lib.tasks.task import Task  # noqa: E402
from tritonrl_lib.verify.pool import VerifierPool  # noqa: E402

SHRUNK_BUDGET = 1 << 16  # input + weight elements of a shrunk problem (the sweep's --small)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="the session's results folder")
    ap.add_argument("--stage", default="sft", help="sft | rl_best_of_n | rl_grpo")
    ap.add_argument("--level", type=int, default=2)
    ap.add_argument("--profile", default="gpu", help="the session's profile: it decides the held-out task list")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="", help="the verdicts as JSON (default ROOT/eval/shrunk_<stage>_L<level>.json)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    root = Path(args.root).resolve()
    cfg, tasks, _, kept = load_kept(root, args.stage, args.profile, args.param)
    completions = kept["completions"]
    flat_tasks, texts = [], []
    for task, samples in zip(tasks, completions):
        if task.meta.get("heldout_set") != "kernelbench" or task.level != args.level:
            continue
        small = Task(id=task.id, level=task.level, name=task.name, source=shrink(task.source, SHRUNK_BUDGET).source,
                     category=task.category)
        for c in samples:
            flat_tasks.append(small)
            texts.append(c["text"])
    t0 = time.perf_counter()
    with VerifierPool(cfg.verify, workers=args.workers, device="cpu") as pool:
        verdicts = pool.map(flat_tasks, texts, desc=f"verify {args.stage} L{args.level} (shrunk)")
    rows = [{"id": t.id, "category": t.category, "correct": v.correct, "reason": v.reason, "error": (v.error or "")[-700:]}
            for t, v in zip(flat_tasks, verdicts)]
    out = Path(args.out) if args.out else root / "eval" / f"shrunk_{args.stage}_L{args.level}.json"
    out.write_text(json.dumps(rows, indent=0))
    reasons = collections.Counter(r["reason"].split(":")[0] for r in rows)
    ctor = sum("ModelNew.__init__()" in r["error"] or ("get_init_inputs" in r["error"] and "TypeError" in r["error"])
               for r in rows)
    print(f"{args.stage} L{args.level}: {sum(r['correct'] for r in rows)} of {len(rows)} correct at shrunk sizes in "
          f"{time.perf_counter() - t0:.0f} s; by reason {dict(reasons)}; {ctor} fail building ModelNew; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
