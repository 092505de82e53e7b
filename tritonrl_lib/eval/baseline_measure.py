"""One task's reference times, eager and under `torch.compile`: the process `baselines.py` starts per task.

    python -m tritonrl_lib.eval.baseline_measure JOB.json RESULTS.jsonl

The task's `Model` is built as the verifier builds it (its init inputs, under the verifier's seed,
on the CPU, then moved to the device) and run on its own inputs (`get_inputs()` under the seed the
verifier's original input set uses), under `torch.no_grad()` as the verifier runs it. Each result is
appended to RESULTS as one JSON line the moment it is known, so a compile that hangs or kills the
process still leaves the eager time behind:

    {"mode": "eager", "ms": .., "median_ms": .., "cv": .., ...}     the reference as written
    {"event": "compiling"}                                           compilation started
    {"mode": "compile", "ms": .., "compile_s": .., "eager_paired_ms": ..}
    {"mode": ..., "error": "...", "reason": "reference_failed" | "oom" | "error"}
                                        (oom: out of memory, the reference's own or the compiled one's)

Timing on a GPU is the verifier's own (verify/candidate/timing.py `time_pair` with a `Clock`: L2 flushed
before every call, a device-wide synchronise inside the timed region, two functions interleaved
trial by trial), and the statistic is its trimmed mean (`timing.summarize`). Eager is timed against
itself; the compiled model against eager, interleaved, so `eager_paired_ms` is eager in the same
trials. Compilation (the first call, and the warm-up after it) is never timed. On the CPU (tests,
no GPU) the same interleaving with the host's clock, no flush, on one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import tempfile
import time
from typing import Any, Callable

from ..verify.candidate.timing import summarize
from ..verify.candidate.timing import Clock, time_pair
from ..verify.candidate.variations import load_task_module
from ..verify.sandbox.gpu_lock import GpuLock, lock_path

TASK_MODULE = "tritonrl_baseline_task"


def classify(e: BaseException) -> str:
    """`oom` for out-of-memory (also wrapped inside a compiler error), else `error`."""
    import torch

    oom = isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()
    return "oom" if oom else "error"


def describe(e: BaseException, limit: int = 600) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def cpu_time_pair(a: Callable[[], Any], b: Callable[[], Any], warmup: int, trials: int) -> dict[str, list[float]]:
    """Per-trial milliseconds of `a` ("ref") and `b` ("cand") on the host's clock, interleaved and
    alternating who goes first, as `timing.time_pair` does on a GPU (which needs CUDA events)."""
    for _ in range(max(0, warmup)):
        a()
        b()
    fns = {"ref": a, "cand": b}
    out: dict[str, list[float]] = {"ref": [], "cand": []}
    for i in range(trials):
        for which in (("ref", "cand") if i % 2 == 0 else ("cand", "ref")):
            t0 = time.perf_counter()
            fns[which]()
            out[which].append((time.perf_counter() - t0) * 1e3)
    return out


def stats(times_ms: list[float], trim: float) -> dict[str, Any]:
    s = summarize(times_ms, trim)
    return {"ms": s["trimmed_mean_ms"], "median_ms": s["median_ms"], "cv": round(s["cv"], 4),
            "min_ms": s["min_ms"], "trials": s["trials"]}


def measure(job: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
    """Set up the timer for the job's device (and the GPU's lock), then measure the task's model."""
    import torch

    device, warmup, trials = job["device"], int(job["warmup"]), int(job["trials"])
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    shared = alone = contextlib.nullcontext
    if device == "cuda":
        # the verifier's lock of this GPU: an evaluation's candidates on it wait while this times, and it
        # waits for their timing (the same GPU id the verifier's pool uses: CUDA_VISIBLE_DEVICES' first)
        gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
        lock = GpuLock(lock_path(gpu))
        shared, alone = lock.shared, lock.alone
        clock = Clock.capture()
        pair = lambda a, b: time_pair(a, b, warmup, trials, clock=clock)  # noqa: E731
    else:
        # one thread: on a shared machine, threads waiting at a barrier for a descheduled sibling turned a
        # 10-microsecond op into milliseconds (min 0.13 ms, mean 15.7 ms for a small Linear on 2 busy cores)
        torch.set_num_threads(1)
        pair = lambda a, b: cpu_time_pair(a, b, warmup, trials)  # noqa: E731

    torch.set_grad_enabled(False)
    with shared():
        measure_model(job, emit, pair, sync, alone)


def measure_model(job: dict[str, Any], emit: Callable[[dict[str, Any]], None], pair: Callable, sync: Callable,
                  alone: Callable) -> None:
    """Build the reference, time it eager, then compiled; each result emitted as soon as it is known."""
    import torch

    # the measuring process alone imports torch (and the candidate's process's modules with it)
    from ..verify.candidate.context import SEED
    from ..verify.candidate.input_sets import drawer  # (as above)

    device, modes, trim = job["device"], list(job["modes"]), float(job["trim"])
    try:
        with tempfile.TemporaryDirectory() as work:
            module = load_task_module(job["source"], work, TASK_MODULE)
        init = list(module.get_init_inputs())
        torch.manual_seed(SEED)
        model = module.Model(*init).to(device)
        draw = drawer(module.get_inputs, SEED, device)
        eager_in = draw()
        model(*eager_in)
        sync()
    except BaseException as e:
        reason = "oom" if classify(e) == "oom" else "reference_failed"
        for mode in modes:
            emit({"mode": mode, "error": f"the reference failed: {describe(e)}", "reason": reason})
        return
    eager = lambda: model(*eager_in)  # noqa: E731
    try:
        if "eager" in modes:
            with alone():
                t = pair(eager, eager)
            emit({"mode": "eager", **stats(t["ref"] + t["cand"], trim)})
    except BaseException as e:
        emit({"mode": "eager", "error": describe(e), "reason": classify(e)})
        for mode in modes:
            if mode != "eager":
                emit({"mode": mode, "error": f"not measured: eager timing failed ({describe(e, 200)})",
                      "reason": "reference_failed"})
        return
    if "compile" not in modes:
        return
    emit({"event": "compiling"})
    try:
        compiled_in = draw()  # its own copy: a reference that changes its inputs changes only its own
        compiled_model = torch.compile(model)  # the default: inductor, mode "default"
        t0 = time.perf_counter()
        compiled_model(*compiled_in)  # compiles; never timed
        sync()
        compile_s = time.perf_counter() - t0
        compiled = lambda: compiled_model(*compiled_in)  # noqa: E731
        with alone():
            t = pair(eager, compiled)  # its warm-up settles what the first call left (autotuning, guards)
        eager_paired = stats(t["ref"], trim)
        emit({"mode": "compile", **stats(t["cand"], trim), "compile_s": round(compile_s, 2),
              "eager_paired_ms": eager_paired["ms"]})
    except BaseException as e:
        emit({"mode": "compile", "error": describe(e), "reason": classify(e)})


def die_with_parent() -> None:
    """Linux: this process is killed when the one that started it dies (even by SIGKILL), so a killed
    `tritonrl baselines` leaves no measurement running (a hanging compile would run forever)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    die_with_parent()
    job_path, results_path = argv
    with open(job_path) as f:
        job = json.load(f)
    if job.get("parent_pid") and os.getppid() != job["parent_pid"]:
        return 1  # the parent died before die_with_parent took hold
    with open(results_path, "a") as out:
        def emit(row: dict[str, Any]) -> None:
            out.write(json.dumps(row) + "\n")
            out.flush()

        measure(job, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
