"""Check the honest KernelBench solutions on the CPU (Triton interpreter) against the real problems,
shrunk to small sizes, through the project's verifier.

    python benchmarks/kernelbench_check.py /path/to/KernelBench              # every solution
    python benchmarks/kernelbench_check.py /path/to/KernelBench --only 19_ReLU,23_Softmax
    python benchmarks/kernelbench_check.py /path/to/KernelBench --json out.json

For each `benchmarks/kernelbench_solutions/level<N>/<problem>.py` the problem file of the same name is
read from the checkout, its size constants are shrunk (kernelbench_common.shrink: batch-like ones to
4, the others divided by a power of two until inputs and weights hold at most --budget elements)
into a temporary KernelBench layout, loaded with `load_kernelbench_dir` and verified with a
`VerifierPool` on the CPU: static check, compile check, the verifier's tiny sizes, then the original
(shrunk) inputs, inputs scaled x2, another seed and the larger batch.

The verifier cannot run every input set on the CPU today, so each solution is also run here, in
this process (they are the project's own code), on sets the verifier skips or does not draw:
float16 and bfloat16 casts of model and inputs (compared against the half reference and against
the float32-accumulated one, as the verifier does on a GPU), and signed inputs of two magnitudes
(randn, randn * 100). "err/scale" is the worst max |out - ref| / max |ref| over every set: how far
the solution is from the reference at the reference's own scale.

Level 2 solutions that leave the GEMM (nn.Linear) in PyTorch are rejected by today's `fusion` policy
(it lets only the convolution family stay); they are reported as "needs GEMM policy" when that is
the only flag, and their numbers are checked by the in-process sets.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # the in-process sets run the kernels under the interpreter
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_common import (CATEGORIES, SOLUTIONS_DIR, Problem, build_pair, close, list_problems,  # noqa: E402
                                list_solutions, max_errors, only_gemm_flags, shrink, verifier_side)

from tritonrl_lib.verify.candidate import interpreter_compat  # noqa: E402

interpreter_compat.install()  # the in-process sets, as the verifier's processes: loops over arguments on Triton 3.6

BF16_DOT_OK = True  # set in main: interpreter_bf16_dot_ok()
HALF_TOL = 5e-2  # the verifier's defaults (VerifyConfig.half_atol / half_rtol, atol / rtol)
FULL_TOL = 1e-2


def interpreter_bf16_dot_ok() -> bool:
    """Whether this Triton's interpreter computes tl.dot on bfloat16 right (3.9's multiplies the
    raw uint16 bit patterns it stores bfloat16 in: results ~1e10 off)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def dot16(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))

    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    c = torch.empty(16, 16)
    dot16[(1,)](a, a, c)
    return bool(torch.allclose(c, a.float() @ a.float(), atol=1e-2, rtol=1e-2))


def in_process_sets(problem_source: str, solution_source: str) -> tuple[dict[str, str], float]:
    """{set: "ok" | "FAIL ..." | "skip ..."} for the sets the verifier does not run on the CPU, and
    the worst error at the reference's scale."""
    import torch

    results: dict[str, str] = {}
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        ref, new, inputs = build_pair(problem_source, solution_source, "cpu", tmp)
        with torch.no_grad():
            base_out = ref(*inputs)
        base_mag = float(base_out.detach().abs().double().mean()) if isinstance(base_out, torch.Tensor) else 0.0

        def judge(name: str, model_ref, model_new, xs, tol: float, alt=None) -> None:
            nonlocal worst
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            with torch.no_grad():
                want = model_ref(*xs)
                if not isinstance(want, torch.Tensor) or not bool(torch.isfinite(want).all()):
                    results[name] = "skip (reference not finite)"
                    return
                try:
                    got = model_new(*xs)
                    again = model_new(*xs)
                except Exception as e:  # a failure of the solution: reported, the check goes on
                    results[name] = f"FAIL {type(e).__name__}: {str(e)[:120]}"
                    return
            unchanged = all(not isinstance(a, torch.Tensor) or torch.equal(a, b) for a, b in zip(xs, before))
            ptr = (lambda t: t.untyped_storage().data_ptr())
            fresh = isinstance(got, torch.Tensor) and ptr(got) != ptr(again) and all(
                not isinstance(x, torch.Tensor) or ptr(got) != ptr(x) for x in xs)
            # the absolute tolerance grows with the outputs' magnitude, as the verifier's does
            grow = max(1.0, float(want.abs().double().mean()) / base_mag) if base_mag > 0 else 1.0
            ok = close(got, want, tol * grow, tol) or (alt is not None and close(got, alt, tol * grow, tol))
            err = max_errors(got, want if alt is None or close(got, want, tol * grow, tol) else alt)
            worst = max(worst, err["rel_to_scale"])
            if not unchanged:
                results[name] = "FAIL input changed"
            elif not fresh:
                results[name] = "FAIL output not fresh"
            elif not ok:
                results[name] = f"FAIL max_abs {err['max_abs']:.3g}"
            else:
                results[name] = "ok"

        gen = torch.Generator().manual_seed(7)
        for name, factor in (("signed", 1.0), ("signed*100", 100.0)):
            xs = [torch.randn(x.shape, generator=gen, dtype=x.dtype) * factor
                  if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            judge(name, ref, new, xs, FULL_TOL)
        judge("original", ref, new, inputs, FULL_TOL)
        for dtype in (torch.float16, torch.bfloat16):
            label = str(dtype).replace("torch.", "")
            if dtype == torch.bfloat16 and "tl.dot" in solution_source and not BF16_DOT_OK:
                results[label] = "skip (the interpreter's tl.dot is wrong on bfloat16)"
                continue
            href, hnew = copy.deepcopy(ref).to(dtype), copy.deepcopy(new).to(dtype)
            xs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            try:
                with torch.no_grad():  # what a kernel that accumulates in float32 computes
                    wide = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
                    alt = copy.deepcopy(href).float()(*wide).to(dtype)
                    href(*xs)
            except Exception as e:  # the reference itself has no CPU kernel in this dtype
                results[label] = f"skip (reference: {type(e).__name__})"
                continue
            judge(label, href, hnew, xs, HALF_TOL, alt=alt)
    return results, worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", help="a KernelBench checkout (its root, or its KernelBench/ folder)")
    ap.add_argument("--solutions", default=str(SOLUTIONS_DIR), help="folder with level1/, level2/ solutions")
    ap.add_argument("--only", default="", help="comma-separated problem names (file stems) to check")
    ap.add_argument("--budget", type=int, default=1 << 17, help="most input + weight elements of a shrunk problem")
    ap.add_argument("--workers", type=int, default=2, help="verifier workers (CPU processes)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="verifier time limit per candidate (interpreter)")
    ap.add_argument("--no-in-process", action="store_true", help="skip the in-process dtype and signed-input sets")
    ap.add_argument("--compile-check", default="auto", choices=("auto", "frontend", "full", "off"),
                    help="the verifier's CUDA compile check of each launch (full: down to a cubin for sm_90)")
    ap.add_argument("--json", default="", help="also write the rows to this file")
    args = ap.parse_args(argv)
    global BF16_DOT_OK
    BF16_DOT_OK = args.no_in_process or interpreter_bf16_dot_ok()

    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.tasks import load_kernelbench_dir
    from tritonrl_lib.verify import VerifierPool

    only = {s.strip() for s in args.only.split(",") if s.strip()}
    solutions = {k: v for k, v in list_solutions(args.solutions).items() if not only or k[1] in only}
    problems = {(p.level, p.name): p for p in list_problems(args.kernelbench, {lvl for lvl, _ in solutions})}
    missing = [f"L{lvl}/{n}" for lvl, n in solutions if (lvl, n) not in problems]
    if missing:
        print(f"no problem file in {args.kernelbench} for: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not solutions:
        print("no solutions selected", file=sys.stderr)
        return 2

    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-check-") as tmp:
        shrunk: dict[tuple[int, str], str] = {}
        for key in solutions:
            prob: Problem = problems[key]
            small = shrink(prob.source, budget=args.budget)
            source, what = small.source, small.what + ("" if small.fits else " (over the budget)")
            folder = Path(tmp) / "KernelBench" / f"level{prob.level}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{prob.name}.py").write_text(source, encoding="utf-8")
            shrunk[key] = source
            rows.append({"level": prob.level, "problem": prob.name, "category": CATEGORIES.get(prob.name, "other"),
                         "sizes": what})
        tasks = {(t.level, t.name): t for t in load_kernelbench_dir(tmp)}
        ordered = list(solutions)
        cfg = VerifyConfig(timeout_s=args.timeout_s, compile_check=args.compile_check)
        t0 = time.monotonic()
        with VerifierPool(cfg, workers=args.workers, device="cpu", progress=False) as pool:
            verdicts = pool.map([tasks[k] for k in ordered], [solutions[k].read_text() for k in ordered])
        verify_s = time.monotonic() - t0
        for row, key, v in zip(rows, ordered, verdicts):
            sets = [e["name"] for e in v.errors if e.get("ok")]
            if v.correct:
                verdict = "correct"
            elif only_gemm_flags(v.cheat_flags):
                verdict = "needs GEMM policy"
            else:
                verdict = f"WRONG {v.reason}"
            row.update(verdict=verdict, reason=v.reason, stage=v.stage, sets_passed=sets,
                       verifier_side=verifier_side(v.reason), duration_s=v.duration_s,
                       error=v.error[:800] if not v.correct else "", notes=v.notes)
            if not args.no_in_process:
                try:
                    extra, worst = in_process_sets(shrunk[key], solutions[key].read_text())
                except Exception as e:  # noqa: BLE001 - reported in the table
                    extra, worst = {"build": f"FAIL {type(e).__name__}: {e}"[:160]}, float("nan")
                row.update(in_process=extra, err_scale=worst)

    print(f"\n{len(rows)} solutions, verifier on the CPU in {verify_s:.0f} s ({args.workers} workers)\n")
    head = "| level | problem | category | verifier | sets passed | in-process sets | err/scale | s |"
    print(head)
    print("|" + "---|" * 8)
    for r in rows:
        extra = r.get("in_process") or {}
        bad = [f"{k}: {v}" for k, v in extra.items() if v != "ok"]
        ext = "all ok" if extra and not bad else ("; ".join(bad) if bad else "-")
        err = f"{r['err_scale']:.1e}" if "err_scale" in r else "-"
        print(f"| {r['level']} | {r['problem']} | {r['category']} | {r['verdict']} | {', '.join(r['sets_passed'])} "
              f"| {ext} | {err} | {r['duration_s']:.0f} |")
    for r in rows:
        if r["verdict"] not in ("correct", "needs GEMM policy") and r["error"]:
            print(f"\n--- {r['problem']}: {r['reason']}\n{r['error']}")
    print("\nsizes:")
    for r in rows:
        print(f"  L{r['level']}/{r['problem']}: {r['sizes']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if r["verdict"] not in ("correct", "needs GEMM policy")
              or any(str(v).startswith("FAIL") for v in (r.get("in_process") or {}).values())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
