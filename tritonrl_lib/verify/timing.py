"""Calibrated GPU timing of a reference/candidate pair, and the statistics the worker derives from it.

Measurement (inside the candidate's process, GPU only): warm both up, then for every trial flush
the L2 cache (write a buffer larger than it), and time one call between CUDA events with a
device-wide synchronise inside the timed region, so work a candidate pushes onto side streams is
counted. The start event is queued behind the flush and a short GPU spin without waiting for them, so
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


def time_pair(ref_fn: Callable[[], Any], cand_fn: Callable[[], Any], warmup: int, trials: int,
              flush: bool = True, device: str = "cuda", head_start_cycles: int = HEAD_START_CYCLES,
              end_before_sync: bool = False) -> dict[str, list[float]]:
    """Per-trial milliseconds of both functions, interleaved, L2 flushed before every call.
    `end_before_sync` records the end event on the stream before the device-wide sync instead of
    after it: blind to work on other streams, never the verifier's (benchmarks/timing_variants.py)."""
    import torch

    buf = l2_flush_buffer(device) if flush else None
    for _ in range(max(0, warmup)):
        ref_fn()
        cand_fn()
    torch.cuda.synchronize()
    fns = {"ref": ref_fn, "cand": cand_fn}
    out: dict[str, list[float]] = {"ref": [], "cand": []}
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for i in range(trials):
        for which in (("ref", "cand") if i % 2 == 0 else ("cand", "ref")):
            if buf is not None:
                buf.zero_()
            if head_start_cycles > 0:
                torch.cuda._sleep(head_start_cycles)
            # no synchronise here: the GPU is still flushing (and spinning) while the call is issued, so
            # the time is the GPU's work and not the host's launch jitter (as triton.testing.do_bench does)
            start.record()
            fns[which]()
            if end_before_sync:
                end.record()
            torch.cuda.synchronize()  # device-wide: side streams finish inside the timed region
            if not end_before_sync:
                end.record()
            end.synchronize()
            out[which].append(start.elapsed_time(end))
    return out


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
