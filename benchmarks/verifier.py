"""Verifier throughput and timing stability: our pool beside the same batch run KernelBench's way.

    python benchmarks/verifier.py                            # CPU (Triton interpreter), small sizes
    python benchmarks/verifier.py --device cuda --out DIR    # GPU: medium sizes + timing stability
    python benchmarks/verifier.py --write-docs               # also write docs/benchmarks/verifier_<device>.{json,md}

The batch mixes candidates for built-in tasks: correct reference solutions, wrong ones (a right
kernel for a different op), static failures (truncated completions), compile failures (a made-up
Triton import), crashes (a kernel that reads a terabyte out of bounds) and slow ones (a tiny block
size). "Ours" is a fresh VerifierPool (worker start-up included) with its defaults: staging, five
input variations, runtime cheat checks, calibrated timing on a GPU. "KernelBench's way" is what its
eval does: a fresh `python` process per candidate that imports everything, builds both models from
one seed, runs 5 correctness trials with allclose (atol = rtol = 1e-2) and, on a GPU, 100 CUDA-event
timing trials; no staging. Both sides run as many candidates at once as the pool has workers, so the
ratio measures per-candidate cost, not parallelism. Verdicts (correct / not) must agree.

On a GPU it also measures timing stability: one reference/candidate pair's speedup measured 10
times by our calibrated method (warmup, 50 interleaved trials, L2 flushed, trimmed mean) and by a
10-trial no-flush CUDA-event timing, each with its coefficient of variation.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KB_TRIALS = 5
KB_TIMING_TRIALS = 100
KB_SEED = 42
KB_TIMEOUT_S = 300
STABILITY_REPEATS = 10

CORRECT = ["relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "sum_dim", "mean_dim", "layer_norm",
           "matmul", "conv2d_bias_relu"]
WRONG = [("relu", "gelu"), ("sigmoid", "tanh"), ("sum_dim", "mean_dim"), ("softmax", "log_softmax")]  # (solution, task)
TRUNCATED = ["relu", "softmax", "matmul"]
BAD_IMPORT = ["relu", "layer_norm", "sum_dim"]
OUT_OF_BOUNDS = ["relu", "sigmoid"]
SLOW = ["relu", "gelu"]


@dataclass
class Candidate:
    label: str
    kind: str  # correct | wrong | static | compile | crash | slow
    task: object  # tritonrl_lib Task
    code: str


def load_tasks(size: str) -> dict:
    """Built-in tasks by name. "medium" is the full (GPU) preset with batch-like sizes divided by 4:
    realistic per-row work, a quarter of the rows, so the GPU run fits in a few minutes."""
    import dataclasses as dc

    from tritonrl_lib.tasks.builtin_suite import load_builtin
    from tritonrl_lib.tasks.kb_format import module_constants, rewrite_constants
    from tritonrl_lib.verify.candidate.variations import is_batch_like

    if size != "medium":
        return {t.name: t for t in load_builtin(size)}
    out = {}
    for t in load_builtin("full"):
        smaller = {k: max(1, v // 4) for k, v in module_constants(t.source).items()
                   if is_batch_like(k) and type(v) is int and v >= 4}
        out[t.name] = dc.replace(t, source=rewrite_constants(t.source, smaller)) if smaller else t
    return out


def build_batch(size: str) -> list[Candidate]:
    tasks = load_tasks(size)
    sol = {name: t.reference_solution for name, t in tasks.items()}
    out = [Candidate(f"{n}/correct", "correct", tasks[n], sol[n]) for n in CORRECT]
    out += [Candidate(f"{t}/wrong({s} kernel)", "wrong", tasks[t], sol[s]) for s, t in WRONG]
    for n in TRUNCATED:
        code = sol[n]
        cut = code[: int(len(code) * 0.6)]
        out.append(Candidate(f"{n}/truncated", "static", tasks[n], cut))
    for n in BAD_IMPORT:
        out.append(Candidate(f"{n}/bad-import", "compile", tasks[n],
                             "from triton.language import fused_everything\n" + sol[n]))
    for n in OUT_OF_BOUNDS:
        code, k = re.subn(r"tl\.load\((\w+_ptr) \+ (offsets|offs)\b", r"tl.load(\1 + \2 + (1 << 40)", sol[n], count=1)
        if k:
            out.append(Candidate(f"{n}/out-of-bounds", "crash", tasks[n], code))
    for n in SLOW:
        code, k = re.subn(r"BLOCK_SIZE=1024", "BLOCK_SIZE=32", sol[n])
        if k:
            out.append(Candidate(f"{n}/slow(block 32)", "slow", tasks[n], code))
    return out


# --------------------------------------------------------------------------- ours


@dataclass
class Cost:
    wall_s: float
    cpu_s: float  # user + system seconds of every process involved (robust to other load on the machine)


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of live processes, including the children they have already reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def _pool_processes(pool) -> list[int]:
    """The pool's workers and whatever lives under them now (a spare child waiting for its job)."""
    from tritonrl_lib.verify.sandbox.processes import descendants, proc_table

    workers = [w.proc.pid for w in pool._slots if w is not None]
    table = proc_table()
    return workers + [p.pid for w in workers for p in descendants(w, table)]


def run_ours(batch: list[Candidate], device: str, workers: int | None,
             overrides: dict | None = None) -> tuple[list[dict], list[dict], Cost, Cost, int]:
    """The batch through a fresh pool (cold: worker start-up included), then once more through the
    same, now warm, pool (the steady state of a training run, where the pool lives on)."""
    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify.pool import VerifierPool

    tasks, codes = [c.task for c in batch], [c.code for c in batch]
    cfg = VerifyConfig(**(overrides or {}))
    wall0, cpu0 = time.perf_counter(), _self_cpu() + _children_cpu()
    with VerifierPool(cfg, workers=workers, device=device, cache=False, progress=True) as pool:
        verdicts = pool.map(tasks, codes, desc="ours (cold)")
        wall1, live1 = time.perf_counter(), tree_cpu_seconds(_pool_processes(pool))
        cold = Cost(wall1 - wall0, _self_cpu() + _children_cpu() + live1 - cpu0)
        self1 = _self_cpu()
        warm_verdicts = pool.map(tasks, codes, desc="ours (warm)")
        warm = Cost(time.perf_counter() - wall1, _self_cpu() - self1 + tree_cpu_seconds(_pool_processes(pool)) - live1)
        size = pool.size
    return [v.to_dict() for v in verdicts], [v.to_dict() for v in warm_verdicts], cold, warm, size


# --------------------------------------------------------------------------- KernelBench's way


def run_kernelbench_way(batch: list[Candidate], device: str, concurrency: int) -> tuple[list[dict], Cost]:
    from tqdm.auto import tqdm

    tmp = Path(tempfile.mkdtemp(prefix="kb-way-"))
    jobs = []
    for i, c in enumerate(batch):
        task_file, cand_file = tmp / f"task_{i}.py", tmp / f"cand_{i}.py"
        task_file.write_text(c.task.source)
        cand_file.write_text(c.code)
        jobs.append((task_file, cand_file))

    def one(job: tuple[Path, Path]) -> dict:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [sys.executable, __file__, "--kb-eval", str(job[0]), str(job[1]), "--device", device]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=KB_TIMEOUT_S, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"correct": False, "error": "timeout"}
        for line in reversed(p.stdout.strip().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return {"correct": False, "error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}

    start, cpu0 = time.perf_counter(), _self_cpu() + _children_cpu()
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as ex:
        results = list(tqdm(ex.map(one, jobs), total=len(jobs), desc="KernelBench way", leave=False))
    return results, Cost(time.perf_counter() - start, _self_cpu() + _children_cpu() - cpu0)


def kb_eval(task_file: str, cand_file: str, device: str) -> None:
    """One candidate KernelBench's way, in this (fresh) process; prints one JSON line."""
    import importlib.util

    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    def load(path: str, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    dev = torch.device("cuda" if device == "cuda" else "cpu")
    result = {"compiled": False, "correct": False}
    try:
        task = load(task_file, "kb_task")
        cand = load(cand_file, "kb_candidate")
        init = task.get_init_inputs()
        torch.manual_seed(KB_SEED)
        ref = task.Model(*init).to(dev)
        torch.manual_seed(KB_SEED)
        new = cand.ModelNew(*init).to(dev)
        result["compiled"] = True
        gen = torch.Generator().manual_seed(KB_SEED)
        seeds = torch.randint(0, 2**32 - 1, (KB_TRIALS,), generator=gen).tolist()
        ok = True
        with torch.no_grad():
            for seed in seeds:
                torch.manual_seed(seed)
                inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
                expected = ref(*inputs)
                got = new(*inputs)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                if got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-2, rtol=1e-2):
                    ok = False
                    break
            result["correct"] = ok
            if ok and dev.type == "cuda":
                times = []
                for _ in range(3):
                    new(*inputs)
                torch.cuda.synchronize()
                for _ in range(KB_TIMING_TRIALS):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    new(*inputs)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
                result["runtime_ms"] = statistics.fmean(times)
    except BaseException as e:  # what KernelBench records as a failed candidate
        result["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(result), flush=True)
    os._exit(0)


# --------------------------------------------------------------------------- timing stability (GPU)


def gpu_state() -> dict:
    """What else the GPU was doing, and its clocks, power and temperature (nvidia-smi), to tell a
    noisy measurement from a disturbed machine."""
    out: dict = {"load_average": os.getloadavg()[0]}
    queries = {"gpu": ["--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu",
                       "--format=csv,noheader"],
               "compute_apps": ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]}
    for name, args in queries.items():
        try:
            out[name] = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True,
                                       timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            out[name] = f"unavailable: {e}"
    return out


def stability(pair: str, out_json: Path) -> dict:
    """Run the stability measurement in a fresh process (trusted code: a built-in task and its own
    reference solution) and read its JSON, with the GPU's state before and after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = gpu_state()
    p = subprocess.run([sys.executable, __file__, "--stability-eval", pair, "--stability-out", str(out_json)],
                       capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"stability run failed:\n{p.stderr[-3000:]}")
    return {**json.loads(out_json.read_text()), "gpu_before": before, "gpu_after": gpu_state()}


def build_pair(pair: str) -> tuple:
    """A built-in task (`full` sizes) and its reference solution on the GPU: (reference model, the
    solution's ModelNew, inputs), each built under KernelBench's seed (trusted code only)."""
    import importlib.util

    import torch

    task = load_tasks("full")[pair]
    tmp = Path(tempfile.mkdtemp(prefix="stability-"))
    (tmp / "stab_task.py").write_text(task.source)
    (tmp / "stab_cand.py").write_text(task.reference_solution)  # Triton reads a kernel's source file

    def load(path: Path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    tm, cm = load(tmp / "stab_task.py", "stab_task"), load(tmp / "stab_cand.py", "stab_cand")
    init = tm.get_init_inputs()
    torch.manual_seed(KB_SEED)
    ref = tm.Model(*init).cuda()
    torch.manual_seed(KB_SEED)
    new = cm.ModelNew(*init).cuda()
    torch.manual_seed(KB_SEED)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in tm.get_inputs()]
    return ref, new, inputs


def stability_eval(pair: str, out_json: str) -> None:
    import torch

    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify.candidate.timing import naive_event_times, speedup_stats, time_pair

    ref, new, inputs = build_pair(pair)
    cfg = VerifyConfig()
    ours, naive, sides = [], [], []
    with torch.no_grad():
        for _ in range(STABILITY_REPEATS):
            t = time_pair(lambda: ref(*inputs), lambda: new(*inputs), cfg.timing_warmup, cfg.timing_trials)
            st = speedup_stats(t["ref"], t["cand"], cfg.timing_trim)
            ours.append(st["speedup"])
            # each side's trimmed mean and median, and when: which side moved in a repeat that is off
            sides.append({"t": time.monotonic(), **{f"{k}_{m}": st[side][f"{m}_ms"] for k, side in
                                                     (("ref", "reference"), ("cand", "candidate"))
                                                     for m in ("trimmed_mean", "median")}})
            r = naive_event_times(lambda: ref(*inputs), trials=10)
            c = naive_event_times(lambda: new(*inputs), trials=10)
            naive.append(statistics.fmean(r) / statistics.fmean(c))

    def cv(xs: list[float]) -> float:
        return statistics.pstdev(xs) / statistics.fmean(xs)

    Path(out_json).write_text(json.dumps({
        "pair": pair, "device": torch.cuda.get_device_name(0), "repeats": STABILITY_REPEATS,
        "ours": {"method": f"warmup {cfg.timing_warmup}, {cfg.timing_trials} interleaved trials, L2 flushed, "
                           f"{cfg.timing_trim:.0%} trimmed mean, device sync inside the timed region",
                 "speedups": ours, "mean": statistics.fmean(ours), "cv": cv(ours), "repeats": sides},
        "naive": {"method": "10 CUDA-event trials, no flush, no interleaving", "speedups": naive,
                  "mean": statistics.fmean(naive), "cv": cv(naive)},
    }, indent=2))


# --------------------------------------------------------------------------- report


def _ours_row(v: dict) -> dict:
    return {"correct": v["correct"], "stage": v["stage"], "reason": v["reason"], "seconds": v["duration_s"],
            "speedup": v["speedup"], "phases": v.get("phases", {})}


def report(batch, ours, ours_warm, cold: Cost, warm: Cost, kb, kbc: Cost, workers, device, stab,
           load) -> tuple[dict, str]:
    n = len(batch)
    rows, disagree = [], []
    for c, v, vw, k in zip(batch, ours, ours_warm, kb):
        agree = bool(v["correct"]) == bool(k.get("correct")) == bool(vw["correct"])
        rows.append({"candidate": c.label, "kind": c.kind, "ours": _ours_row(v), "ours_warm": _ours_row(vw),
                     "kernelbench_way": k, "agree": agree})
        if not agree:
            disagree.append(c.label)
    def per_min(c: Cost) -> tuple[float, float]:
        return n / c.wall_s * 60, n / c.cpu_s * 60

    (ours_pm, ours_cpm), (warm_pm, warm_cpm), (kb_pm, kb_cpm) = per_min(cold), per_min(warm), per_min(kbc)
    data = {
        "device": device, "host": platform.node(), "cpus": os.cpu_count(), "workers": workers,
        "load_average": load,
        "candidates": n, "kinds": {k: sum(c.kind == k for c in batch) for k in dict.fromkeys(c.kind for c in batch)},
        "ours": {"seconds": cold.wall_s, "cpu_seconds": cold.cpu_s, "per_minute": ours_pm, "per_cpu_minute": ours_cpm},
        "ours_warm": {"seconds": warm.wall_s, "cpu_seconds": warm.cpu_s, "per_minute": warm_pm,
                      "per_cpu_minute": warm_cpm},
        "kernelbench_way": {"seconds": kbc.wall_s, "cpu_seconds": kbc.cpu_s, "per_minute": kb_pm,
                            "per_cpu_minute": kb_cpm, "trials": KB_TRIALS,
                            "timing_trials": KB_TIMING_TRIALS if device == "cuda" else 0},
        "ratio": ours_pm / kb_pm, "ratio_warm": warm_pm / kb_pm,
        "ratio_cpu": ours_cpm / kb_cpm, "ratio_cpu_warm": warm_cpm / kb_cpm,
        "agree": n - len(disagree), "disagreements": disagree, "rows": rows,
        "stability": stab,
    }
    lines = [
        f"Verifier benchmark on {device} ({os.cpu_count()} CPUs, {workers} worker(s) / concurrent processes): "
        f"{n} candidates ({', '.join(f'{v} {k}' for k, v in data['kinds'].items())})",
        "",
        f"Load average while it ran (other work on the machine): {load['start']:.1f} at the start, "
        f"{load['end']:.1f} at the end. Wall time is what the brief asks for; CPU time (every process "
        "involved) is the same comparison made robust to that load.",
        "",
        "| method | wall (s) | cand / min | ratio | CPU (s) | cand / CPU-min | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| KernelBench's way (fresh process, {KB_TRIALS} trials"
        + (f", {KB_TIMING_TRIALS} timing trials" if device == "cuda" else "")
        + f") | {kbc.wall_s:.1f} | {kb_pm:.1f} | 1.0x | {kbc.cpu_s:.1f} | {kb_cpm:.1f} | 1.0x |",
        f"| ours, fresh pool (worker start-up included) | {cold.wall_s:.1f} | {ours_pm:.1f} | "
        f"**{ours_pm / kb_pm:.1f}x** | {cold.cpu_s:.1f} | {ours_cpm:.1f} | **{ours_cpm / kb_cpm:.1f}x** |",
        f"| ours, warm pool (same batch again) | {warm.wall_s:.1f} | {warm_pm:.1f} | {warm_pm / kb_pm:.1f}x | "
        f"{warm.cpu_s:.1f} | {warm_cpm:.1f} | {warm_cpm / kb_cpm:.1f}x |",
        "",
        f"Verdicts agree (correct / not): {n - len(disagree)} of {n}"
        + (f"; disagreements: {', '.join(disagree)}" if disagree else ""),
        "",
        "| candidate | kind | ours: stage / reason | s (fresh) | s (warm) | KernelBench way |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in rows:
        k = r["kernelbench_way"]
        kb_text = "correct" if k.get("correct") else ("incorrect" + (f" ({k['error'][:40]})" if k.get("error") else ""))
        lines.append(f"| {r['candidate']} | {r['kind']} | {r['ours']['stage']} / {r['ours']['reason']} | "
                     f"{r['ours']['seconds']:.1f} | {r['ours_warm']['seconds']:.1f} | {kb_text} |")
    if stab:
        lines += ["", f"Timing stability, {stab['pair']} on {stab['device']}, "
                      f"speedup measured {stab['repeats']} times:",
                  "", "| method | mean speedup | CV |", "|---|---:|---:|",
                  f"| ours ({stab['ours']['method']}) | {stab['ours']['mean']:.3f} | {stab['ours']['cv']:.2%} |",
                  f"| naive ({stab['naive']['method']}) | {stab['naive']['mean']:.3f} | {stab['naive']['cv']:.2%} |"]
    return data, "\n".join(lines)


def parse_overrides(items: list[str]) -> dict:
    """`--set KEY=VALUE` pairs as VerifyConfig fields, each value read as that field's type."""
    import dataclasses

    from tritonrl_lib.core.config import VerifyConfig

    fields = {f.name: f for f in dataclasses.fields(VerifyConfig)}
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        kind = type(getattr(VerifyConfig(), key))
        out[key] = (value.lower() in ("1", "true", "yes", "on")) if kind is bool else kind(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--workers", type=int, default=None, help="pool workers (default: the pool's own choice)")
    ap.add_argument("--out", default=None, help="folder for verifier_<device>.json / .md")
    ap.add_argument("--write-docs", action="store_true", help="write docs/benchmarks/verifier_<device>.{json,md}")
    ap.add_argument("--pair", default="softmax", help="built-in task whose solution is timed for stability (GPU)")
    ap.add_argument("--size", choices=("small", "medium", "full"), default=None,
                    help="task sizes (default: small on the CPU, medium = full / 4 in batch on a GPU)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a verify setting for our pool, e.g. prestart_child=off (repeatable)")
    ap.add_argument("--ours-only", action="store_true",
                    help="only our pool (cold and warm), no KernelBench way or timing stability: for ablations")
    ap.add_argument("--trace", action="store_true",
                    help="record when each candidate reached each point (TRITONRL_TRACE) in the verdicts' "
                         "phases and draw the pool's timeline (verifier_timeline_<device>.png in --out)")
    ap.add_argument("--kb-eval", nargs=2, metavar=("TASK", "CAND"), help=argparse.SUPPRESS)
    ap.add_argument("--stability-eval", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stability-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.kb_eval:
        kb_eval(args.kb_eval[0], args.kb_eval[1], args.device)
        return 0
    if args.stability_eval:
        stability_eval(args.stability_eval, args.stability_out)
        return 0

    # The caller of a verifier is a torch program: import what it would already have loaded, so the
    # clock below measures verification, not this script's own start-up.
    import torch  # noqa: F401

    import tritonrl_lib.verify.extract  # noqa: F401
    import tritonrl_lib.verify.pool  # noqa: F401
    import tritonrl_lib.verify.static  # noqa: F401

    size = args.size or ("medium" if args.device == "cuda" else "small")
    batch = build_batch(size)
    print(f"{len(batch)} candidates, task size {size!r}", flush=True)
    load_start = os.getloadavg()[0]
    overrides = parse_overrides(args.set)
    stab = None
    if args.device == "cuda" and not args.ours_only:
        # first, on a quiet GPU: nothing the batches below start can still be running then
        stab = stability(args.pair, Path(tempfile.mkdtemp()) / "stability.json")
    if args.trace:
        os.environ["TRITONRL_TRACE"] = "1"  # the pool's workers and children inherit it
    ours, ours_warm, cold, warm, workers = run_ours(batch, args.device, args.workers, overrides)
    if args.trace and args.out:
        from verifier_timeline import draw_timeline

        png = Path(args.out) / f"verifier_timeline_{args.device}.png"
        draw_timeline([c.label for c in batch], ours, ours_warm, png)
        print(f"wrote {png}")
    if args.ours_only:
        data = {"device": args.device, "workers": workers, "settings": overrides, "candidates": len(batch),
                "ours": {"seconds": cold.wall_s, "cpu_seconds": cold.cpu_s},
                "ours_warm": {"seconds": warm.wall_s, "cpu_seconds": warm.cpu_s},
                "load_average": {"start": load_start, "end": os.getloadavg()[0]},
                "rows": [{"candidate": c.label, "correct": v["correct"], "reason": v["reason"],
                          "seconds": v["duration_s"], "phases": v.get("phases", {}),
                          "warm": {"seconds": vw["duration_s"], "phases": vw.get("phases", {})}}
                         for c, v, vw in zip(batch, ours, ours_warm)]}
        print(f"ours {overrides}: cold {cold.wall_s:.1f} s wall / {cold.cpu_s:.1f} s CPU, "
              f"warm {warm.wall_s:.1f} s / {warm.cpu_s:.1f} s")
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            name = "_".join(f"{k}-{v}" for k, v in overrides.items()) or "defaults"
            (Path(args.out) / f"verifier_{args.device}_ours_{name}.json").write_text(json.dumps(data, indent=2))
        return 0
    kb, kbc = run_kernelbench_way(batch, args.device, workers)
    load = {"start": load_start, "end": os.getloadavg()[0]}
    data, text = report(batch, ours, ours_warm, cold, warm, kb, kbc, workers, args.device, stab, load)
    print(text)
    targets = [("throughput ratio >= 5x (fresh pool, wall)", data["ratio"] >= 5.0),
               ("throughput ratio >= 5x (fresh pool, CPU)", data["ratio_cpu"] >= 5.0),
               ("throughput ratio >= 5x (warm pool, wall)", data["ratio_warm"] >= 5.0),
               ("verdicts agree", not data["disagreements"])]
    if stab:
        targets.append(("timing CV < 1%", stab["ours"]["cv"] < 0.01))
    print("\n" + "  ".join(f"[{'ok' if ok else 'MISSED'}] {name}" for name, ok in targets))
    dests = []
    if args.out:
        dests.append(Path(args.out))
    if args.write_docs:
        dests.append(ROOT / "docs" / "benchmarks")
    for d in dests:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"verifier_{args.device}.json").write_text(json.dumps(data, indent=2))
        (d / f"verifier_{args.device}.md").write_text(text + "\n")
        print(f"wrote {d / f'verifier_{args.device}.json'} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
