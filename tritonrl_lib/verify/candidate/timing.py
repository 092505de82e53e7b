"""Calibrated GPU timing of a reference/candidate pair, and the statistics the worker derives from it.

Measurement (inside the candidate's process, GPU only): warm both up, then for every trial flush
the L2 cache (write a buffer larger than it), and time one call between CUDA events with a
device-wide synchronise inside the timed region, so work a candidate pushes onto side streams is
counted. The timer's functions (`Clock`) are captured before the candidate's module is imported,
and outputs of timed calls are sent to the worker to be checked like any other. The start event is queued behind the flush and a short GPU spin without waiting for them, so
the call is issued while the GPU is still busy and the host's launch jitter stays out of the time. Reference and candidate alternate trial by trial (and swap who goes first), so clock and
thermal drift hit both alike. The statistics (`summarize`, `speedup_stats`) are pure Python: the
worker computes them from the raw per-trial times, outside the candidate's reach.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable

MIN_FLUSH_BYTES = 256 << 20
# GPU cycles of idle spin queued after each flush (~0.2 ms at 2 GHz): the host has that long, besides
# the flush, to issue the timed call before the GPU reaches the start event. Without it a host slow for
# a moment (a Triton launch is tens of microseconds of Python) left the GPU idle inside the timed
# region: speedup CV 0.45 / 2.55 / 0.23% over three rounds against 0.39 / 0.29 / 0.14% with it
# (benchmarks/timing_variants.py, docs/PERFORMANCE.md)
HEAD_START_CYCLES = 400_000


def summarize(times_ms: list[float], trim: float) -> dict[str, float]:
    """Trimmed mean (dropping `trim` of the trials at each end), median, spread of per-trial times."""
    xs = sorted(float(t) for t in times_ms if isinstance(t, (int, float)) and math.isfinite(t) and t >= 0)
    if not xs:
        raise ValueError("no valid timing trials")
    k = int(len(xs) * trim)
    kept = xs[k:len(xs) - k] or xs
    mean = statistics.fmean(kept)
    std = statistics.pstdev(kept) if len(kept) > 1 else 0.0
    q1, q3 = _quantile(xs, 0.25), _quantile(xs, 0.75)
    return {
        "trimmed_mean_ms": mean,
        "median_ms": statistics.median(xs),
        "std_ms": std,
        "cv": std / mean if mean > 0 else 0.0,
        "iqr_ms": q3 - q1,
        "min_ms": xs[0],
        "max_ms": xs[-1],
        "trials": len(xs),
        "trimmed_trials": len(kept),
    }


def _quantile(sorted_xs: list[float], q: float) -> float:
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def speedup_stats(ref_ms: list[float], cand_ms: list[float], trim: float) -> dict[str, Any]:
    ref, cand = summarize(ref_ms, trim), summarize(cand_ms, trim)
    return {
        "reference": ref,
        "candidate": cand,
        "speedup": ref["trimmed_mean_ms"] / cand["trimmed_mean_ms"] if cand["trimmed_mean_ms"] > 0 else math.inf,
        "speedup_median": ref["median_ms"] / cand["median_ms"] if cand["median_ms"] > 0 else math.inf,
    }


# --------------------------------------------------------------------------- GPU side


def l2_flush_buffer(device: str = "cuda"):
    """A buffer at least twice the L2 cache (and at least 256 MiB); writing it evicts everything."""
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    l2 = int(getattr(props, "L2_cache_size", 0) or getattr(props, "l2_cache_size", 0) or 0)
    nbytes = max(MIN_FLUSH_BYTES, 2 * l2)
    return torch.empty(nbytes // 4, dtype=torch.int32, device=device)


class Clock:
    """The timer's primitives, taken before the candidate's module is imported: the C functions behind
    `torch.cuda.synchronize`, a CUDA event's `record` / `synchronize` / `elapsed_time`, the GPU spin
    and the flush's `zero_`, the host's `perf_counter`, signal masking and the garbage collector's
    switch. A candidate that rebinds `torch.cuda.synchronize`, patches `torch.cuda.Event.elapsed_time`
    (through an alias, setattr, `__dict__` or a subclass) or `time.perf_counter` changes names, not
    these objects. (Build one with `Clock.capture()` on the GPU.)"""

    def __init__(self) -> None:
        import gc
        import os as _os
        import signal as _signal
        import time as _time

        import torch

        base = torch._C._CudaEventBase
        self.sync = torch._C._cuda_synchronize
        self.record = base.record
        self.event_sync = base.synchronize
        self.elapsed = base.elapsed_time
        self.spin = torch._C._cuda_sleep
        self.zero = torch._C.TensorBase.zero_
        self.clone = torch._C.TensorBase.clone
        self.now = _time.perf_counter
        self.urandom = _os.urandom
        self.sigmask = getattr(_signal, "pthread_sigmask", None)
        self.setitimer = getattr(_signal, "setitimer", None)
        self.block = _signal.SIG_BLOCK
        self.setmask = _signal.SIG_SETMASK
        self.all_signals = _signal.valid_signals() if hasattr(_signal, "valid_signals") else set()
        self.gc_disable, self.gc_enable, self.gc_enabled = gc.disable, gc.enable, gc.isenabled
        self.stream = torch.cuda.current_stream()
        self.new_event = lambda: torch.cuda.Event(enable_timing=True)
        self.buf = l2_flush_buffer()

    @classmethod
    def capture(cls) -> Clock:
        return cls()


def time_pair(ref_fn: Callable[[], Any], cand_fn: Callable[[], Any], warmup: int, trials: int,
              flush: bool = True, device: str = "cuda", head_start_cycles: int = HEAD_START_CYCLES,
              end_before_sync: bool = False, clock: Clock | None = None,
              on_output: Callable[[int, Any], None] | None = None, checked: int = 0,
              before_cand: Callable[[int], Any] | None = None) -> dict[str, list[float]]:
    """Per-trial milliseconds of both functions, interleaved, L2 flushed before every call.

    With `clock` (captured before the candidate ran) every primitive is that clock's, signals are
    blocked and the garbage collector is off while it times (no code of the candidate's can run between
    trials: no handler, no callback), and each candidate output stays alive until the next trial's
    timed region has begun (a finaliser that would do work when it is freed does it inside a timed
    region). `on_output(trial, output)` receives the candidate's output of `checked` trials chosen at
    random after they ran, and of the last: the caller has them checked. `before_cand(trial)` runs
    before each candidate trial's flush (the caller refills the inputs in place with other values, so
    an answer remembered by the inputs' address is stale). `end_before_sync` records the
    end event on the stream before the device-wide sync instead of after it: blind to work on other
    streams, never the verifier's (benchmarks/timing_variants.py)."""
    import torch

    c = clock
    if c is None:  # the benchmarks' plain way: names looked up now
        buf = l2_flush_buffer(device) if flush else None
        sync, spin = torch.cuda.synchronize, torch.cuda._sleep
        record = lambda ev: ev.record()  # noqa: E731
        event_sync = lambda ev: ev.synchronize()  # noqa: E731
        elapsed = lambda a, b: a.elapsed_time(b)  # noqa: E731
        zero = lambda t: t.zero_()  # noqa: E731
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    else:
        buf = c.buf if flush else None
        sync, spin, zero = c.sync, c.spin, c.zero
        record = lambda ev: c.record(ev, c.stream)  # noqa: E731
        event_sync, elapsed = c.event_sync, c.elapsed
        start, end = c.new_event(), c.new_event()
    chosen: set[int] = set()
    if on_output is not None and trials > 0:
        rand = c.urandom if c is not None else __import__("os").urandom
        chosen = {int.from_bytes(rand(4), "little") % trials for _ in range(max(0, checked))} | {trials - 1}
    masked = c is not None and c.sigmask is not None
    old_mask = None
    gc_was = None
    if c is not None:
        gc_was = c.gc_enabled()
        c.gc_disable()
        if masked:
            old_mask = c.sigmask(c.block, c.all_signals)
    try:
        for _ in range(max(0, warmup)):
            ref_fn()
            cand_fn()
        sync()
        fns = {"ref": ref_fn, "cand": cand_fn}
        out: dict[str, list[float]] = {"ref": [], "cand": []}
        held = None  # the candidate's last output, freed inside the next timed region
        for i in range(trials):
            for which in (("ref", "cand") if i % 2 == 0 else ("cand", "ref")):
                if which == "cand" and before_cand is not None:
                    before_cand(i)
                if buf is not None:
                    zero(buf)
                if head_start_cycles > 0:
                    spin(head_start_cycles)
                # no synchronise here: the GPU is still flushing (and spinning) while the call is issued, so
                # the time is the GPU's work and not the host's launch jitter (as triton.testing.do_bench does)
                record(start)
                if which == "cand":
                    held = None
                result = fns[which]()
                if end_before_sync:
                    record(end)
                sync()  # device-wide: side streams finish inside the timed region
                if not end_before_sync:
                    record(end)
                event_sync(end)
                out[which].append(elapsed(start, end))
                if which == "cand":
                    held = result
                    if i in chosen and on_output is not None:
                        on_output(i, result)
                del result
        return out
    finally:
        if c is not None:
            if masked and old_mask is not None:
                c.sigmask(c.setmask, old_mask)
            if gc_was:
                c.gc_enable()


def naive_event_times(fn: Callable[[], Any], trials: int = 10, warmup: int = 3) -> list[float]:
    """The common quick way (for comparison only): a few CUDA-event trials, no flush, no interleave."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(trials):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return out
