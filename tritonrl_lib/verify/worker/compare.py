"""Output comparison on the trusted side: a candidate's raw output bytes against the reference's.

Outputs arrive as raw bytes with a {dtype, shape, device} description (never unpickled: they come
from the candidate's process). `compare` checks kind, device, dtype and shape, then values, with
numpy, chunk by chunk (on a few threads for large outputs): NaN where the reference is finite
fails, inf/NaN of the reference must be held exactly, the rest must lie within atol + rtol * |ref|
(exact for integer and bool outputs), and the output as a whole must be close relative to the
reference's own scale (`norm_ok`): an elementwise absolute tolerance alone lets any output pass whose
values all lie below it (zeros, a tiny multiple of the input, a constant: a softmax over 16,384
features, an L2 normalisation, a mean of centred data, a min over [0, 1) inputs). `same_bytes` is the cached-output check's bit comparison and
`mean_abs` the magnitude the judge scales its absolute tolerance with.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .. import reasons as R

# elements compared at a time: a chunk's temporaries (~1 MiB each) stay in the core's caches between
# the comparison's passes (benchmarks/compare_chunks.py: 8M float32 on one thread 22 ms at 2**18, 36 ms at 2**22)
_CHUNK = 1 << 18
HALF = ("float16", "bfloat16")
EXACT = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_NP = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2", "int8": "i1", "int16": "<i2",
       "int32": "<i4", "int64": "<i8", "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
       "bool": "?", "complex64": "<f4", "complex128": "<f8"}


class BadOutput(ValueError):
    """An output description or byte count that does not fit (the judge calls it a protocol error)."""


def decode(meta: dict[str, Any], blob: bytes | bytearray) -> np.ndarray:
    """Raw bytes + {dtype, shape} -> a flat numpy array (bf16 widened to float32, complex as pairs)."""
    dtype = meta.get("dtype")
    shape = meta.get("shape")
    if dtype not in _NP or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise BadOutput(f"unsupported output description {str(meta)[:200]}")
    arr = np.frombuffer(blob, dtype=np.dtype(_NP[dtype]))
    n = int(np.prod(shape, dtype=np.int64)) * (2 if dtype.startswith("complex") else 1)
    if arr.size != n:
        raise BadOutput(f"output of shape {shape} sent with {len(blob)} bytes")
    if dtype == "bfloat16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def compare(ref_meta: dict, ref_blob: bytes, cand_meta: dict, cand_blob: bytes, atol: float,
            rtol: float, norm_slack: float = 0.0) -> dict[str, Any]:
    """allclose(candidate, reference) with the verifier's rules; returns ok, reason, max_abs, max_rel.
    The output's dtype must be the reference's on every input set: a float32 output for half-precision
    inputs where the reference returns half is `dtype_mismatch`, as any other dtype is. `norm_slack`
    widens the norm rule by that much (TF32's own error on the set: precision.py)."""
    out: dict[str, Any] = {"shape": cand_meta.get("shape"), "dtype": cand_meta.get("dtype")}
    if cand_meta.get("kind") != "tensor":
        return {**out, "ok": False, "reason": R.WRONG_OUTPUT_TYPE,
                "detail": f"forward returned a {cand_meta.get('type', '?')}, expected a tensor"}
    devices = (cand_meta.get("device"), ref_meta.get("device"))
    if devices[0] != devices[1] and "any" not in devices:  # "any": a Python number, on no device
        return {**out, "ok": False, "reason": R.DEVICE_MISMATCH,
                "detail": f"output on {cand_meta.get('device')}, the reference's on {ref_meta.get('device')}"}
    if cand_meta.get("dtype") != ref_meta.get("dtype"):
        return {**out, "ok": False, "reason": R.DTYPE_MISMATCH,
                "detail": f"output dtype {cand_meta.get('dtype')}, expected {ref_meta.get('dtype')} (the "
                          "reference's, on these inputs)"}
    if cand_meta.get("shape") != ref_meta.get("shape"):
        return {**out, "ok": False, "reason": R.SHAPE_MISMATCH,
                "detail": f"output shape {cand_meta.get('shape')}, expected {ref_meta.get('shape')}"}
    ref, cand = decode(ref_meta, ref_blob), decode(cand_meta, cand_blob)
    exact = ref_meta["dtype"] in EXACT
    # float32 arithmetic is exact enough for tolerances of 1e-2..1e-5 and halves the memory traffic
    work = np.float64 if ref_meta["dtype"] in ("float64", "complex128") else np.float32
    starts = range(0, ref.size, _CHUNK)
    parts = _map_chunks(lambda i: _compare_chunk(ref[i:i + _CHUNK], cand[i:i + _CHUNK], exact, work, atol, rtol),
                        starts)
    n_bad = sum(p[0] for p in parts)
    n_nan = sum(p[1] for p in parts)
    n_nonfinite_bad = sum(p[2] for p in parts)
    max_abs = max((p[3] for p in parts), default=0.0)
    max_rel = max((p[4] for p in parts), default=0.0)
    out.update(max_abs=max_abs, max_rel=max_rel)
    if not exact:
        sum_d2, sum_r2, n_fin = sum(p[5] for p in parts), sum(p[6] for p in parts), sum(p[7] for p in parts)
        out["rel_l2"] = math.sqrt(sum_d2 / sum_r2) if sum_r2 > 0 else (0.0 if sum_d2 == 0 else math.inf)
    total = max(1, ref.size // (2 if ref_meta["dtype"].startswith("complex") else 1))
    if n_nan:
        return {**out, "ok": False, "reason": R.NAN_OUTPUT,
                "detail": f"{n_nan} NaN values where the reference is finite"}
    if n_bad or n_nonfinite_bad:
        what = f"{n_bad + n_nonfinite_bad} of {total} values differ"
        if n_nonfinite_bad:
            what += f" ({n_nonfinite_bad} where the reference is inf/NaN)"
        return {**out, "ok": False, "reason": R.MISMATCH,
                "detail": f"{what} beyond atol={atol:g}, rtol={rtol:g}" if not exact else f"{what} (exact dtype)"}
    if not exact and not norm_ok(sum_d2, sum_r2, n_fin, atol, rtol, norm_slack):
        return {**out, "ok": False, "reason": R.MISMATCH,
                "detail": f"every value lies within atol={atol:g} of the reference, but the output as a whole is "
                          f"{out['rel_l2']:.3g} off relative to the reference's own size (||out - ref|| / ||ref||; "
                          f"allowed {rtol:g}): values this small pass an absolute tolerance whatever they hold"}
    return {**out, "ok": True}


NORM_FLOOR = 1e-3  # of atol, as a root-mean-square: the error allowed where the reference itself is ~0


def norm_ok(sum_d2: float, sum_r2: float, n: int, atol: float, rtol: float, slack: float = 0.0) -> bool:
    """The per-tensor rule beside allclose: ||out - ref||_2 <= rtol * ||ref||_2 + NORM_FLOOR * atol * sqrt(n).

    The relative error of the whole output is bounded by the same rtol as each value's; the floor (an
    RMS error of a thousandth of atol) keeps a reference that is zero, or rounding noise around zero,
    from demanding the impossible. Zeros, a constant or a scaled copy are off by O(1) relative to the
    reference and fail, at any magnitude; honest float32, TF32 and half-precision kernels are off by
    1e-7..1e-2."""
    if not n:
        return True
    return math.sqrt(max(sum_d2, 0.0)) <= rtol * math.sqrt(max(sum_r2, 0.0)) + NORM_FLOOR * atol * math.sqrt(n) \
        + slack


_SCRATCH = threading.local()  # per thread: page-faulting fresh temporaries costs as much as the math
_POOL: ThreadPoolExecutor | None = None
COMPARE_THREADS = max(1, min(4, os.cpu_count() or 1))


def _map_chunks(fn: Any, starts: range) -> list[Any]:
    """fn over every chunk start; on a thread pool when there are several (numpy releases
    the GIL on large arrays, so a 100 MB output is compared on several cores)."""
    global _POOL
    if len(starts) < 2 or COMPARE_THREADS < 2:
        return [fn(i) for i in starts]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(COMPARE_THREADS, thread_name_prefix="tritonrl-compare")
    return list(_POOL.map(fn, starts))


def _scratch(n: int, work: Any) -> tuple[np.ndarray, ...]:
    """This thread's three `work` buffers and one bool buffer, n long (kept and grown, never shrunk)."""
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None or bufs[0].dtype != work or bufs[0].size < n:
        bufs = (np.empty(n, work), np.empty(n, work), np.empty(n, work), np.empty(n, bool))
        _SCRATCH.bufs = bufs
    return tuple(x[:n] for x in bufs)


def _squares(x: np.ndarray) -> float:
    """Sum of squares of a finite chunk (float32 dot, recomputed in float64 where it overflowed)."""
    s = float(np.dot(x, x))
    return s if math.isfinite(s) else float(np.dot(x.astype(np.float64), x.astype(np.float64)))


def _compare_chunk(b: np.ndarray, a: np.ndarray, exact: bool, work: Any, atol: float,
                   rtol: float) -> tuple[int, int, int, float, float, float, float, int]:
    """(values out of tolerance, NaN where the reference is finite, inf/NaN of the reference not held,
    max |diff|, max relative diff, sum of squared differences and of squared reference values where
    both are finite, how many those are) of one chunk: candidate `a` against reference `b`."""
    if exact:
        wrong = a != b
        if not wrong.any():
            return 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0
        return (int(np.count_nonzero(wrong)), 0, 0,
                float(np.abs(a[wrong].astype(np.float64) - b[wrong].astype(np.float64)).max()), 0.0, 0.0, 0.0, 0)
    floor = max(atol, 1e-12)  # max_rel is relative to the reference, floored at atol so zeros do not explode
    b, a = b.astype(work, copy=False), a.astype(work, copy=False)
    n = b.size
    if not n:
        return 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0
    buf_diff, buf_mag, buf_thr, buf_close = _scratch(n, work)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.subtract(a, b, out=buf_diff)
        np.abs(diff, out=diff)
        mag = np.abs(b, out=buf_mag)
        thr = np.multiply(mag, rtol, out=buf_thr)
        thr += atol
        close = np.less_equal(diff, thr, out=buf_close)
        # the common case: every value within tolerance, and finite (an infinite reference makes the
        # threshold infinite too, so a finite candidate value there would pass `close` on its own)
        if close.all():
            max_abs = float(diff.max())
            if math.isfinite(max_abs):
                sums = _squares(diff), _squares(b)
                np.maximum(mag, floor, out=thr)
                return 0, 0, 0, max_abs, float(np.divide(diff, thr, out=thr).max()), *sums, n
        n_nonfinite_bad = 0
        fin = np.isfinite(b)
        if not fin.all():  # where the reference is inf/NaN the candidate must hold the same
            an, bn = a[~fin], b[~fin]
            n_nonfinite_bad = int(np.count_nonzero(~((np.isnan(an) & np.isnan(bn)) | (an == bn))))
            a, b, diff, mag, close = a[fin], b[fin], diff[fin], mag[fin], close[fin]
        n_nan = int(np.count_nonzero(np.isnan(a)))
        n_bad = int(np.count_nonzero(~close))
        max_abs = max_rel = sum_d2 = sum_r2 = 0.0
        measurable = np.isfinite(diff)
        n_fin = int(np.count_nonzero(measurable))
        if n_fin:
            d = diff[measurable]
            max_abs = float(d.max())
            max_rel = float((d / np.maximum(mag[measurable], floor)).max())
            sum_d2, sum_r2 = _squares(d), _squares(b[measurable])
    return n_bad, n_nan, n_nonfinite_bad, max_abs, max_rel, sum_d2, sum_r2, n_fin


def mean_abs(meta: dict[str, Any], blob: bytes | bytearray) -> float:
    """Mean absolute value of the finite entries of one output (0 if none). The child sends it with
    each reference (computed on the device); this is the fallback for a reference without it."""
    arr = decode(meta, blob)
    total, count = 0.0, 0
    for k in range(0, arr.size, _CHUNK):
        part = np.abs(arr[k:k + _CHUNK])
        s = float(np.add.reduce(part, dtype=np.float64))
        if not np.isfinite(s):
            part = part[np.isfinite(part)]
            s = float(np.add.reduce(part, dtype=np.float64))
        total += s
        count += part.size
    return total / count if count else 0.0


_PEEK = 1 << 16


def same_bytes(a: list[Any], b: list[Any]) -> bool:
    """Whether two sets of outputs are bit-identical (the cached-output check). Outputs that differ
    almost always differ in their first 64 KiB, so those are compared first and the rest only if
    they agree: ~0 s for different outputs of any size, where hashing every byte cost 12-22 ms per
    32 MB; equal ones are compared in full (8 bytes at a time)."""
    if len(a) != len(b):
        return False
    pairs = [(memoryview(x).cast("B"), memoryview(y).cast("B")) for x, y in zip(a, b)]
    if any(x.nbytes != y.nbytes or x[:_PEEK] != y[:_PEEK] for x, y in pairs):
        return False
    for x, y in pairs:
        k = x.nbytes - x.nbytes % 8
        xs, ys = np.frombuffer(x, np.uint8), np.frombuffer(y, np.uint8)
        if not (np.array_equal(xs[:k].view(np.uint64), ys[:k].view(np.uint64)) and np.array_equal(xs[k:], ys[k:])):
            return False
    return True
