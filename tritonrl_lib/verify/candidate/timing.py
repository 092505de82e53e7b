"""Calibrated GPU timing of a reference/candidate pair, and the statistics the worker derives from it.

Measurement (inside the candidate's process, GPU only): warm both up, then for every trial flush
the L2 cache (write a buffer larger than it), and time one call between CUDA events with a
device-wide synchronise inside the timed region, so work a candidate pushes onto side streams is
counted. The timer's functions (`Clock`) are captured before the candidate's module is imported,
and outputs of timed calls are sent to the worker to be checked like any other. The start event is
queued on the caller's stream behind the flush and a short GPU spin without waiting for them, so the
call is issued while the GPU is still busy and the host's launch jitter stays out of the time.

What the measured time covers: from the start event (on the caller's stream, after the flush and the
spin) to the end event, recorded after a device-wide synchronise: all GPU work the call queued that is
ordered after the caller's stream, on any stream. Work queued on a stream that does not wait for the
caller's could run during the flush and the spin, before the start event, and leave the time: the
stream-order check (gpu_work.py) makes any such work a verdict of its own (`cheat:unordered_stream`),
on every timed call as on every checked one, so no timed call gets that window. Each candidate call
gets inputs it has never seen (timed_inputs.py), drawn before its flush; the process's global state is
read after each (process_state.py), so a switch flipped for the reference's next trial shows.
Reference and candidate alternate trial by trial (and swap who goes first), so clock and thermal
drift hit both alike; a precision-matched reference (TF32 allowed for its trial only: precision.py) is
a third interleaved side where asked. The statistics (`summarize`, `speedup_stats`) are pure Python:
the worker computes them from the raw per-trial times, outside the candidate's reach.
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
        self.tf32 = Tf32Allowed()

    @classmethod
    def capture(cls) -> Clock:
        return cls()


class Tf32Allowed:
    """TF32 allowed for cuBLAS and cuDNN around one call (`run(fn)`), then every precision switch put back
    exactly as it was (the legacy flags, `float32_matmul_precision` and each `fp32_precision`): the
    precision-matched reference's trial. Its functions are PyTorch's C setters and getters, taken when
    made (before the candidate's import)."""

    PRECISIONS = (("generic", "all"), ("cuda", "all"), ("cuda", "matmul"), ("cuda", "conv"), ("cuda", "rnn"),
                  ("mkldnn", "all"), ("mkldnn", "matmul"), ("mkldnn", "conv"), ("mkldnn", "rnn"))

    def __init__(self) -> None:
        import torch

        c = torch._C
        self.flags = [(c._get_float32_matmul_precision, c._set_float32_matmul_precision),
                      (c._get_cublas_allow_tf32, c._set_cublas_allow_tf32),
                      (c._get_cudnn_allow_tf32, c._set_cudnn_allow_tf32)]
        get_p, set_p = getattr(c, "_get_fp32_precision_getter", None), getattr(c, "_set_fp32_precision_setter", None)
        self.precisions = []
        if get_p is not None and set_p is not None:
            for backend, op in self.PRECISIONS:
                try:
                    get_p(backend, op)
                except Exception:
                    continue
                self.precisions.append((lambda b=backend, o=op: get_p(b, o), lambda v, b=backend, o=op: set_p(b, o, v)))
        self.allow = (c._set_cublas_allow_tf32, c._set_cudnn_allow_tf32)

    def run(self, fn: Callable[[], Any]) -> Any:
        try:
            saved = [get() for get, _ in self.flags] + [get() for get, _ in self.precisions]
        except RuntimeError:  # PyTorch refuses to read its switches (legacy and new ones mixed): as it is
            return fn()
        try:
            for allow in self.allow:
                allow(True)
            return fn()
        finally:
            self.restore(saved)

    def restore(self, saved: list[Any]) -> None:
        # the fine-grained switches (the ground truth where PyTorch has them), then the legacy ones where
        # they read otherwise (each setter writes the others it shadows), then the fine-grained ones again
        n = len(self.flags)
        for (_, put), value in zip(self.precisions, saved[n:]):
            put(value)
        for (get, put), value in zip(self.flags, saved[:n]):
            try:
                differs = get() != value
            except RuntimeError:
                differs = True
            if differs:
                put(value)
        for (_, put), value in zip(self.precisions, saved[n:]):
            put(value)


def time_pair(ref_fn: Callable[[], Any], cand_fn: Callable[[], Any], warmup: int, trials: int,
              flush: bool = True, device: str = "cuda", head_start_cycles: int = HEAD_START_CYCLES,
              end_before_sync: bool = False, clock: Clock | None = None,
              on_output: Callable[[int, Any], None] | None = None, checked: int = 0,
              before_cand: Callable[[int], Any] | None = None, after_cand: Callable[[int], Any] | None = None,
              chosen: set[int] | None = None, ref_tf32_fn: Callable[[], Any] | None = None
              ) -> dict[str, list[float]]:
    """Per-trial milliseconds of both functions, interleaved, L2 flushed before every call.

    With `clock` (captured before the candidate ran) every primitive is that clock's, signals are
    blocked and the garbage collector is off while it times (no code of the candidate's can run between
    trials: no handler, no callback), and each candidate output stays alive until the next trial's
    timed region has begun (a finaliser that would do work when it is freed does it inside a timed
    region). `on_output(trial, output)` receives the candidate's output of the `chosen` trials (else of
    `checked` trials chosen at random, and of the last): the caller has them checked.
    `before_cand(call)` runs before each candidate call's flush, warm-up calls included (numbered below
    0): the caller gives the call its inputs there. `after_cand(call)` runs after each candidate call's
    time was read: the caller's checks of what the call left behind (stream order, global state).
    `ref_tf32_fn`, where given, is timed as a third side ("ref_tf32") in every trial. `end_before_sync`
    records the end event on the stream before the device-wide sync instead of after it: blind to work
    on other streams, never the verifier's (benchmarks/timing_variants.py)."""
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
    if chosen is None:
        chosen = set()
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
        for k in range(max(0, warmup)):
            ref_fn()
            if ref_tf32_fn is not None:
                ref_tf32_fn()
            call = k - max(0, warmup)
            if before_cand is not None:
                before_cand(call)
            cand_fn()
            if after_cand is not None:
                sync()
                after_cand(call)
        sync()
        fns = {"ref": ref_fn, "cand": cand_fn}
        sides = ("ref", "cand")
        if ref_tf32_fn is not None:
            fns["ref_tf32"] = ref_tf32_fn
            sides = ("ref", "ref_tf32", "cand")
        out: dict[str, list[float]] = {side: [] for side in sides}
        held = None  # the candidate's last output, freed inside the next timed region
        for i in range(trials):
            for which in (sides if i % 2 == 0 else sides[::-1]):
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
                    if after_cand is not None:
                        after_cand(i)
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
