"""The verifier on a real KernelBench checkout, at its published sizes: three sweeps, resumable.

    python benchmarks/kernelbench_sweep.py --kernelbench KB --out DIR                    # GPU, everything
    python benchmarks/kernelbench_sweep.py --kernelbench KB --out DIR --parts honest --budget-s 540
    python benchmarks/kernelbench_sweep.py --kernelbench KB --out DIR --device cpu --small --limit 3

Parts (--parts, run in the order given):

- refcopy: every problem's own source with `Model` renamed `ModelNew` as the candidate, verified
  with the static check on (expected: rejected statically) and off (expected: it runs, and the
  runtime policy judges it not correct: no Triton launch, PyTorch compute). The candidate is the
  reference itself, so any error verdict (internal_error, protocol_error, worker_lost,
  reference_error, memory_limit, out_of_memory, timeout, a crash, a runtime error such as the
  file-size limit) is the verifier's: the target is zero.
- small_output: a one-line Triton kernel returning 1e-7 * its first input, for every problem whose
  output has that input's shape (worked out on the meta device); it must be judged wrong
  everywhere (a pass is a false pass).
- honest: the project's own solutions (benchmarks/kernelbench_solutions/level<N>/<problem>.py); all
  must be correct, each with its speedup from the verifier beside triton.testing.do_bench of the
  same pair (reference, solution) measured here, in this process, in the same run.

Every verdict is appended to DIR/<part>.jsonl as soon as its chunk is done, so a run cut short
(--budget-s stops before a chunk that would not finish in time; a killed run loses one chunk) is
resumed by running the same command again: finished candidates are skipped. Each run appends its
chunks' wall time to DIR/runs.jsonl (throughput = candidates / verifying wall time, over all runs)
and rewrites DIR/summary.md, the tables below, from everything in DIR for that size mode.

--small (with --device cpu, to test the plumbing): problems shrunk by kernelbench_common.shrink into
a temporary checkout; problems that cannot shrink within the budget are left out and listed.
--verify key=value sets a VerifyConfig field for this run (e.g. --verify memory_limit_mb=65536).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_records import PARTS, Store, expectation, log_chunk, summary, verdict_record  # noqa: E402

SMALL_BUDGET = 1 << 16  # input + weight elements of a problem in --small mode

SMALL_OUTPUT_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tiny_multiple_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x * 1e-7).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x, *rest):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n:
            tiny_multiple_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        return out
'''


def reference_copy(source: str) -> str:
    """The problem's own module as a candidate: `Model` renamed `ModelNew` (every mention)."""
    return re.sub(r"\bModel\b", "ModelNew", source)


# --------------------------------------------------------------------------- timing beside the verifier


def bench_pair(problem_source: str, solution_source: str, device: str) -> dict[str, Any]:
    """The same pair the verifier timed (same sizes, weights, seed), built here and timed with
    triton.testing.do_bench (on a GPU, inputs drawn on it; on the CPU a wall-clock median of 3 calls
    under the interpreter, for the plumbing only). `agree`: the two outputs match within the
    verifier's default tolerances."""
    import torch

    from kernelbench_common import build_pair, close

    with tempfile.TemporaryDirectory() as tmp:
        try:
            # on a GPU the inputs are drawn there: timings of these kernels do not depend on the values
            ref, new, inputs = build_pair(problem_source, solution_source, device, tmp,
                                          draw_on_device=device == "cuda")
            with torch.no_grad():
                agree = close(new(*inputs), ref(*inputs), 1e-2, 1e-2)
                if device == "cuda":
                    from triton.testing import do_bench

                    ref_ms = do_bench(lambda: ref(*inputs))
                    new_ms = do_bench(lambda: new(*inputs))
                    how = "triton.testing.do_bench"
                else:
                    def median_ms(fn) -> float:
                        times = []
                        for _ in range(3):
                            t0 = time.perf_counter()
                            fn()
                            times.append((time.perf_counter() - t0) * 1e3)
                        return statistics.median(times)

                    ref_ms, new_ms = median_ms(lambda: ref(*inputs)), median_ms(lambda: new(*inputs))
                    how = "cpu wall clock (interpreter)"
            out = {"how": how, "ref_ms": float(f"{ref_ms:.4g}"), "new_ms": float(f"{new_ms:.4g}"),
                   "speedup": float(f"{ref_ms / new_ms:.4g}") if new_ms > 0 else None, "agree": agree}
        except Exception as e:  # reported in the record and the table; the sweep goes on
            out = {"how": "failed", "error": f"{type(e).__name__}: {str(e)[:300]}"}
        finally:
            ref = new = inputs = None
            if device == "cuda":
                torch.cuda.empty_cache()
    return out


# --------------------------------------------------------------------------- the run


@dataclasses.dataclass
class Item:
    key: str  # "<mode>:<task id>:<variant>", what a resumed run skips
    task: Any
    code: str  # the candidate's source
    variant: str  # static | runtime (reference copies), tiny (small output), honest


class Clock:
    def __init__(self, budget_s: float | None):
        self.start = time.monotonic()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def allows(self, next_chunk_s: float) -> bool:
        return self.budget_s is None or self.elapsed() + next_chunk_s <= self.budget_s


def run_items(part: str, items: list[Item], static: bool, pool: Any, store: Store, args: Any, clock: Clock,
              device: str, mode: str, folder: Path) -> int:
    """Verify the items not yet in the store, a chunk at a time; returns how many are left."""
    pending = [it for it in items if not store.done(it.key)]
    size = max(1, args.chunk or 2 * pool.size)
    last = 0.0
    while pending:
        if not clock.allows(last):
            print(f"  {part}: stopping at the time budget, {len(pending)} left (run again to resume)", flush=True)
            return len(pending)
        chunk, pending = pending[:size], pending[size:]
        t0 = time.monotonic()
        verdicts = pool.map([it.task for it in chunk], [it.code for it in chunk], static=static, progress=False)
        wall = time.monotonic() - t0
        log_chunk(folder, f"{part}:{chunk[0].variant}", mode, len(chunk), wall, device)
        for it, v in zip(chunk, verdicts):
            rec = verdict_record(part, it.key, mode, it.task, it.variant, v)
            if part == "honest":
                rec["do_bench"] = bench_pair(it.task.source, it.code, device)
            rec["outcome"] = expectation(part, it.variant, rec)
            store.add(rec)
            mark = "" if rec["outcome"] == "expected" else f"  <-- {rec['outcome']}"
            print(f"  {part:12s} {it.variant:8s} {it.task.id:70s} {rec['reason'][:60]}{mark}", flush=True)
        last = time.monotonic() - t0
    return 0


def load_tasks(args: Any, levels: set[int], tmp: str) -> tuple[list[Any], dict[str, str]]:
    """The problems to sweep as Tasks (published sizes, or shrunk copies with --small), and the
    ones left out with why."""
    from kernelbench_common import footprint, list_problems, shrink
    from tritonrl_lib.tasks import load_kernelbench_dir

    problems = list_problems(args.kernelbench, levels)
    if args.limit:
        per_level: dict[int, int] = collections.Counter()
        kept = []
        for p in problems:
            if per_level[p.level] < args.limit:
                kept.append(p)
                per_level[p.level] += 1
        problems = kept
    if args.only:
        wanted = {s.strip() for s in args.only.split(",") if s.strip()}
        problems = [p for p in problems if p.name in wanted]
    left_out: dict[str, str] = {}
    if not args.small:
        names = {(p.level, p.name) for p in problems}
        tasks = load_kernelbench_dir(args.kernelbench, levels=levels)
        return [t for t in tasks if (t.level, t.name) in names], left_out
    for p in problems:
        small = shrink(p.source, budget=SMALL_BUDGET)
        if not small.fits and not (small.what != "unchanged"
                                   and footprint(small.source, run_forward=False).elements <= 16 * SMALL_BUDGET):
            left_out[p.task_id] = f"cannot shrink within {16 * SMALL_BUDGET} elements ({small.what})"
            continue
        folder = Path(tmp) / "KernelBench" / f"level{p.level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{p.name}.py").write_text(small.source, encoding="utf-8")
    if not any(Path(tmp).glob("KernelBench/level*/*.py")):
        return [], left_out
    return load_kernelbench_dir(tmp, levels=levels), left_out


def small_output_eligible(task: Any) -> tuple[bool, str]:
    """Whether the problem's only output has the shape of its first input, a float tensor (and
    why not)."""
    from kernelbench_common import io_shapes

    try:
        inputs, outputs = io_shapes(task.source, SMALL_BUDGET)
    except Exception as e:  # noqa: BLE001 - the problem is left out of this part, with the reason
        return False, f"shapes not worked out ({type(e).__name__}: {str(e)[:80]})"
    first = inputs[0] if inputs else None
    if first is None or not first[1].startswith(("float", "bfloat")):
        return False, "first input is not a float tensor"
    if len(outputs) != 1 or outputs[0] != first[0]:
        return False, "output shape differs from the first input's"
    return True, ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True, help="a KernelBench checkout (root or its KernelBench/ folder)")
    ap.add_argument("--out", required=True, help="folder for the jsonl records, runs.jsonl and summary.md")
    ap.add_argument("--levels", default="1,2", help="comma-separated levels (default 1,2)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many problems per level (0: all)")
    ap.add_argument("--only", default="", help="comma-separated problem names (file stems)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, in order: {', '.join(PARTS)}")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--small", action="store_true", help="shrunk sizes (to test the plumbing on the CPU)")
    ap.add_argument("--solutions", default="", help="the honest solutions' folder "
                    "(default benchmarks/kernelbench_solutions)")
    ap.add_argument("--workers", type=int, default=0, help="verifier workers (0: the pool's default)")
    ap.add_argument("--chunk", type=int, default=0, help="candidates per pool.map call (0: twice the workers)")
    ap.add_argument("--budget-s", type=float, default=None, help="start no chunk that would end after this")
    ap.add_argument("--verify", action="append", default=[], metavar="KEY=VALUE",
                    help="a VerifyConfig field for this run, e.g. timeout_s=300 (repeatable)")
    args = ap.parse_args(argv)

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the in-process pair runs on it
    from kernelbench_common import SOLUTIONS_DIR, list_solutions
    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify import VerifierPool

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    levels = {int(x) for x in args.levels.split(",") if x.strip()}
    cfg = verify_config(VerifyConfig(), args.verify)
    mode = "small" if args.small else "published"
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    clock = Clock(args.budget_s)
    solutions = list_solutions(args.solutions or SOLUTIONS_DIR, levels)

    left = 0
    with tempfile.TemporaryDirectory(prefix="kb-sweep-") as tmp:
        tasks, left_out = load_tasks(args, levels, tmp)
        for tid, why in left_out.items():
            print(f"left out {tid}: {why}")
        print(f"{len(tasks)} problems ({mode} sizes) on {device}; parts: {', '.join(parts)}", flush=True)
        with VerifierPool(cfg, workers=args.workers or None, device=device, progress=False) as pool:
            for part in parts:
                store = Store(folder, part)
                for static, items in part_items(part, tasks, mode, store, solutions):
                    left += run_items(part, items, static, pool, store, args, clock, device, mode, folder)
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu (Triton interpreter)"
    text = summary(folder, mode, device_name, clock.elapsed(), left)
    (folder / "summary.md").write_text(text)
    print("\n" + text)
    return 0


def part_items(part: str, tasks: list[Any], mode: str, store: Store,
               solutions: dict[tuple[int, str], Path]) -> list[tuple[bool, list[Item]]]:
    """A part's candidates, as (static check on?, items) batches."""
    if part == "refcopy":
        return [(static, [Item(f"{mode}:{t.id}:{variant}", t, reference_copy(t.source), variant) for t in tasks])
                for static, variant in ((True, "static"), (False, "runtime"))]
    if part == "small_output":
        items = []
        for t in tasks:
            key = f"{mode}:{t.id}:tiny"
            ok, why = (True, "") if store.done(key) else small_output_eligible(t)
            if ok:
                items.append(Item(key, t, SMALL_OUTPUT_CANDIDATE, "tiny"))
            else:
                print(f"  small_output skips {t.id}: {why}")
        return [(True, items)]
    return [(True, [Item(f"{mode}:{t.id}:honest", t, solutions[(t.level, t.name)].read_text(), "honest")
                     for t in tasks if (t.level, t.name) in solutions])]


def verify_config(base: Any, pairs: Iterable[str]) -> Any:
    """`base` with KEY=VALUE overrides, each converted to the field's type."""
    changes = {}
    fields = {f.name: f for f in dataclasses.fields(base)}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"--verify {pair}: VerifyConfig has no field {key!r} (fields: {', '.join(fields)})")
        current = getattr(base, key)
        if isinstance(current, bool):
            value: Any = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int):
            value = int(raw)
        elif isinstance(current, float):
            value = float(raw)
        elif isinstance(current, list):
            value = [x for x in raw.split(",") if x]
        else:
            value = raw
        changes[key] = value
    return dataclasses.replace(base, **changes)


if __name__ == "__main__":
    sys.exit(main())
