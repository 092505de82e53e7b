"""The trusted side of a verification: turns what a candidate's process sent into a Verdict.

The worker feeds every framed message of the child to a `Judge`. Reference outputs are accepted
only before `ref_done` (the candidate is imported after it), so the candidate cannot have touched
them. Candidate outputs are compared here, with numpy on raw bytes (never unpickled), chunk by
chunk: dtype, shape, NaN rules, allclose with tolerances by dtype (the absolute one grows with the
outputs' magnitude where an input set's reference outputs are larger than the original's). The facts the child measured
(Triton launches, the aten-op census, inputs unchanged) are judged here against the policy. The
first failure stops the child at once; a stage gate is answered "go" only when every output of
that stage was right. A `compile_error` reported from the tiny or full stage (a launch Triton
rejects, on either device) means the candidate did not pass compile: stage "static", reward 0.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from .compile_check import warm_full_pipeline
from .native_builds import NativeBuilder
from .reference_cache import ReferenceCache, cache_key, recv_fds, send_record
from .reference_cache import export as export_reference
from .reward import compute_reward
from .sandbox import SPARES, Limits, SandboxOutcome, run_sandboxed
from .timing import speedup_stats
from .verdict import Verdict, stage_index

# elements compared at a time: a chunk's temporaries (~1 MiB each) stay in the core's caches between
# the comparison's passes (benchmarks/compare_chunks.py: 8M float32 on one thread 22 ms at 2**18, 36 ms at 2**22)
_CHUNK = 1 << 18
_HALF = ("float16", "bfloat16")
_EXACT = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_NP = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2", "int8": "i1", "int16": "<i2",
       "int32": "<i4", "int64": "<i8", "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
       "bool": "?", "complex64": "<f4", "complex128": "<f8"}
_REASON = re.compile(r"^[a-z_]{1,40}(:[A-Za-z0-9_.:\-]{1,160})?$")
_CHILD_REASONS = {"compile_error", "runtime_error", "exit_called", "out_of_memory", "cuda_error"}
MAX_FLAGS_LISTED = 8
MAX_ATOL_GROWTH = 1000.0
MAX_MARKS = 60  # trace points kept per candidate (TRITONRL_TRACE)


class BadOutput(ValueError):
    pass


# --------------------------------------------------------------------------- comparison


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
            rtol: float) -> dict[str, Any]:
    """allclose(candidate, reference) with the verifier's rules; returns ok, reason, max_abs, max_rel."""
    out: dict[str, Any] = {"shape": cand_meta.get("shape"), "dtype": cand_meta.get("dtype")}
    if cand_meta.get("kind") != "tensor":
        return {**out, "ok": False, "reason": "wrong_output_type",
                "detail": f"forward returned a {cand_meta.get('type', '?')}, expected a tensor"}
    devices = (cand_meta.get("device"), ref_meta.get("device"))
    if devices[0] != devices[1] and "any" not in devices:  # "any": a Python number, on no device
        return {**out, "ok": False, "reason": "device_mismatch",
                "detail": f"output on {cand_meta.get('device')}, the reference's on {ref_meta.get('device')}"}
    if cand_meta.get("dtype") != ref_meta.get("dtype"):
        return {**out, "ok": False, "reason": "dtype_mismatch",
                "detail": f"output dtype {cand_meta.get('dtype')}, expected {ref_meta.get('dtype')}"}
    if cand_meta.get("shape") != ref_meta.get("shape"):
        return {**out, "ok": False, "reason": "shape_mismatch",
                "detail": f"output shape {cand_meta.get('shape')}, expected {ref_meta.get('shape')}"}
    ref, cand = decode(ref_meta, ref_blob), decode(cand_meta, cand_blob)
    exact = ref_meta["dtype"] in _EXACT
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
    total = max(1, ref.size // (2 if ref_meta["dtype"].startswith("complex") else 1))
    if n_nan:
        return {**out, "ok": False, "reason": "nan_output",
                "detail": f"{n_nan} NaN values where the reference is finite"}
    if n_bad or n_nonfinite_bad:
        what = f"{n_bad + n_nonfinite_bad} of {total} values differ"
        if n_nonfinite_bad:
            what += f" ({n_nonfinite_bad} where the reference is inf/NaN)"
        return {**out, "ok": False, "reason": "mismatch",
                "detail": f"{what} beyond atol={atol:g}, rtol={rtol:g}" if not exact else f"{what} (exact dtype)"}
    return {**out, "ok": True}


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


def _compare_chunk(b: np.ndarray, a: np.ndarray, exact: bool, work: Any, atol: float,
                   rtol: float) -> tuple[int, int, int, float, float]:
    """(values out of tolerance, NaN where the reference is finite, inf/NaN of the reference not held,
    max |diff|, max relative diff) of one chunk: candidate `a` against reference `b`."""
    if exact:
        wrong = a != b
        if not wrong.any():
            return 0, 0, 0, 0.0, 0.0
        return (int(np.count_nonzero(wrong)), 0, 0,
                float(np.abs(a[wrong].astype(np.float64) - b[wrong].astype(np.float64)).max()), 0.0)
    floor = max(atol, 1e-12)  # max_rel is relative to the reference, floored at atol so zeros do not explode
    b, a = b.astype(work, copy=False), a.astype(work, copy=False)
    n = b.size
    if not n:
        return 0, 0, 0, 0.0, 0.0
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
                np.maximum(mag, floor, out=thr)
                return 0, 0, 0, max_abs, float(np.divide(diff, thr, out=thr).max())
        n_nonfinite_bad = 0
        fin = np.isfinite(b)
        if not fin.all():  # where the reference is inf/NaN the candidate must hold the same
            an, bn = a[~fin], b[~fin]
            n_nonfinite_bad = int(np.count_nonzero(~((np.isnan(an) & np.isnan(bn)) | (an == bn))))
            a, b, diff, mag, close = a[fin], b[fin], diff[fin], mag[fin], close[fin]
        n_nan = int(np.count_nonzero(np.isnan(a)))
        n_bad = int(np.count_nonzero(~close))
        max_abs = max_rel = 0.0
        measurable = np.isfinite(diff)
        if measurable.any():
            d = diff[measurable]
            max_abs = float(d.max())
            max_rel = float((d / np.maximum(mag[measurable], floor)).max())
    return n_bad, n_nan, n_nonfinite_bad, max_abs, max_rel


# --------------------------------------------------------------------------- the judge


class Judge:
    def __init__(self, job: dict[str, Any], builder: NativeBuilder | None = None):
        self.job = job
        self.builder = builder  # the worker's builds of Triton's C modules (native_builds.py)
        self.build_requests = 0
        self.s = job["settings"]
        self.policy = job["policy"]
        self.started = time.monotonic()
        self.phases: dict[str, float] = {}
        self.tracing = bool(os.environ.get("TRITONRL_TRACE"))
        self.trace: dict[str, float] = {"@job": round(self.started, 4)} if self.tracing else {}
        self._phase_from = self.started
        self.worker_s = 0.0  # time spent here on the child's references and outputs
        self.refs: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.cand_outputs: dict[str, list[Any]] = {}  # per input set: the candidate's outputs (sealed)
        self.ref_done = False
        self.passed = "static"  # the pool ran extract and static before sending the job
        self.flags: list[str] = []
        self.notes: list[str] = []
        self.failure: tuple[str, str] | None = None  # (reason, error)
        self.failure_stage: str | None = None
        self.timing: dict[str, Any] | None = None
        self.done = False
        # the reference phase as the worker's reference cache keeps it (reference_cache.py)
        self.preloaded = False
        self._preloaded_notes = 0
        self.ref_notes: list[str] = []
        self.ref_inputs: dict[str, dict[str, Any]] = {}
        self.ref_models: dict[str, Any] | None = None
        self.cacheable = True

    def preload(self, refs: dict[str, dict[str, Any]], notes: list[str]) -> None:
        """Reference outputs (and the notes of their phase) from the worker's cache: the child will
        not send its own unless it finds the cache does not fit its models (then "ref_reset")."""
        self.refs = {name: dict(rec) for name, rec in refs.items()}
        self._preloaded_notes = len(notes)
        self.notes = list(notes) + self.notes
        self.preloaded = True
        self.cacheable = False

    def reference_record(self) -> dict[str, Any] | None:
        """This candidate's reference phase, for the worker's cache; None unless it completed with
        every input set's inputs and every model's digest."""
        if not (self.cacheable and self.ref_done and self.ref_models and self.refs) or \
                (self.failure is not None and self.failure[0] in ("reference_error", "internal_error")) or \
                set(self.ref_inputs) != set(self.refs):
            return None
        return {"refs": self.refs, "notes": list(self.ref_notes), "models": self.ref_models,
                "sets": [{"name": n, "stage": self.refs[n]["stage"], **self.ref_inputs[n]} for n in self.refs]}

    # ---------------------------------------------------------------- messages

    def on_message(self, header: dict[str, Any], blobs: list[bytearray]) -> str | dict[str, str] | None:
        kind = header.get("type")
        try:
            if kind == "build":  # not part of the verdict: Triton in the child wants a C module built
                if self.builder is None:
                    return {"error": "this worker does not build modules"}
                self.build_requests += 1
                return self.builder.answer(header, self.build_requests - 1)
            if kind == "mark":
                if isinstance(header.get("holds"), list):
                    self._mark_holds(header["holds"])
                else:
                    self.mark(str(header.get("label", ""))[:40], header.get("t"), header.get("lock_wait"))
                return None
            if kind == "note":
                if len(self.notes) < 50:
                    self.notes.append(str(header.get("text", ""))[:300])
                    if not self.ref_done:
                        self.ref_notes.append(self.notes[-1])
                return None
            if kind in ("ref_inputs", "ref_models", "ref_uncacheable", "ref_reset"):
                if self.ref_done:
                    return self._fail("protocol_error", f"{kind} after the reference was done")
                return self._reference_cache_message(kind, header, blobs)
            if kind == "ref":
                with self._worker_time():
                    return self._ref(header, blobs)
            if kind == "ref_error":
                return self._fail("reference_error",
                                  "the task's reference failed:\n" + str(header.get("error", ""))[-3000:])
            if kind == "ref_done":
                self._phase("reference")
                self.ref_done = True
                if "original" not in self.refs:
                    return self._fail("reference_error", "no reference outputs for the original inputs")
                return None
            if not self.ref_done:
                return self._fail("protocol_error", f"message {kind!r} before the reference was done")
            if kind == "stage" and header.get("stage") == "compile" and self.passed == "static":
                self._phase("compile")
                self.passed = "compile"
                return None
            if kind == "cand":
                with self._worker_time():
                    return self._cand(header, blobs)
            if kind == "gate":
                return self._gate(str(header.get("stage")))
            if kind == "error":
                return self._child_error(header)
            if kind == "timing":
                return self._timing(header)
            if kind == "done":
                self.done = True
                self.mark("done")
                return "final"  # nothing follows: the sandbox ends the process without waiting for its exit
            if kind == "internal_error":
                return self._fail("internal_error", str(header.get("error", ""))[-3000:])
            return self._fail("protocol_error", f"unexpected message {str(kind)[:40]!r}")
        except BadOutput as e:
            return self._fail("protocol_error", str(e))

    def mark(self, label: str, t: Any = None, lock_wait: Any = None) -> None:
        """A point of this candidate's run on the machine's monotonic clock (`@label`) and the GPU
        lock wait of its process until then (`%label`): a diagnostic, only with TRITONRL_TRACE set
        (benchmarks/verifier.py --trace). The child's values are for people, never for the verdict."""
        if not self.tracing or sum(1 for k in self.trace if k[0] != "|") >= 2 * MAX_MARKS:
            return
        self.trace[f"@{label}"] = round(float(t), 4) if isinstance(t, (int, float)) else round(time.monotonic(), 4)
        if isinstance(lock_wait, (int, float)):
            self.trace[f"%{label}"] = round(float(lock_wait), 4)

    def _mark_holds(self, holds: list[Any]) -> None:
        """The child's GPU lock holds (TRITONRL_TRACE): `|s3` / `|s3~` = when its fourth hold, shared
        ("s") or alone ("a"), began / ended."""
        if not self.tracing:
            return
        for k, h in enumerate(holds[:60]):
            if isinstance(h, list) and len(h) == 3 and all(isinstance(x, (int, float)) for x in h[1:]):
                mode = "a" if h[0] == "alone" else "s"
                self.trace[f"|{mode}{k}"] = round(float(h[1]), 4)
                self.trace[f"|{mode}{k}~"] = round(float(h[2]), 4)

    def _fail(self, reason: str, error: str, stage: str | None = None) -> str:
        if self.failure is None:
            self.failure = (reason, error)
            self.failure_stage = stage
        return "stop"

    def _flag(self, flag: str, error: str) -> str:
        flag = re.sub(r"[^A-Za-z0-9_.:\-]", "_", flag)[:120]  # kernel and op names end up in reasons
        if flag not in self.flags:
            self.flags.append(flag)
        return self._fail(f"cheat:{flag}", error)

    def _ref(self, header: dict[str, Any], blobs: list[bytearray]) -> str | None:
        if self.ref_done:
            return self._fail("protocol_error", "reference outputs sent after the candidate was imported")
        name, stage = str(header.get("name")), header.get("stage")
        metas = header.get("outputs")
        if stage not in ("tiny", "full") or not isinstance(metas, list) or name in self.refs:
            return self._fail("internal_error", f"malformed reference message for {name}")
        # a half-precision input set may carry a second, equally valid reference: the same model run
        # in float32 on the same rounded inputs (PyTorch's own half kernels, scans on CUDA among
        # them, may accumulate in half; a kernel that accumulates in float32 is right, not wrong)
        alt = header.get("alt_outputs")
        n_alt = len(alt) if isinstance(alt, list) else 0
        tensors = [m for m in metas if isinstance(m, dict) and m.get("kind") == "tensor"]
        if len(tensors) != len(metas) or len(blobs) != len(metas) + n_alt:
            return self._fail("reference_error", f"the reference's outputs for {name} are not all tensors")
        if n_alt and (n_alt != len(metas) or any(not isinstance(a, dict) or a.get("kind") != "tensor"
                                                 or a.get("dtype") != m.get("dtype") or a.get("shape") != m.get("shape")
                                                 for a, m in zip(alt, metas))):
            return self._fail("internal_error", f"malformed alternative reference for {name}")
        for m, b in zip(metas + (alt if n_alt else []), blobs):
            decode(m, b)  # validates sizes
        main = blobs[:len(metas)]
        mags = header.get("magnitudes")  # mean |output| per output, measured in the child (trusted here)
        if not (isinstance(mags, list) and len(mags) == len(metas) and all(
                isinstance(m, (int, float)) and not isinstance(m, bool) and 0 <= m < float("inf") for m in mags)):
            mags = None
        self.refs[name] = {"stage": stage, "metas": metas, "blobs": main, "magnitudes": mags,
                           "alt": blobs[len(metas):] if n_alt else None,
                           "inputs": str(header.get("inputs", ""))[:300]}
        return None

    def _reference_cache_message(self, kind: str, header: dict[str, Any], blobs: list[Any]) -> str | None:
        if kind == "ref_reset":  # the child found the cached reference does not fit its models
            if self.preloaded:
                del self.notes[:self._preloaded_notes]
                self.refs, self.preloaded = {}, False
            return None
        if kind == "ref_uncacheable":
            self.cacheable = False
            return None
        if kind == "ref_models":
            digests = header.get("digests")
            if isinstance(digests, dict) and all(isinstance(v, str) for v in digests.values()):
                tiny = header.get("tiny_overrides")
                self.ref_models = {"digests": digests, "tiny_overrides": tiny if isinstance(tiny, dict) else None}
            return None
        name, metas = str(header.get("name")), header.get("inputs")
        specs = header.get("out_specs")
        if name not in self.refs or name in self.ref_inputs or not isinstance(metas, list) or \
                not isinstance(specs, list):
            self.cacheable = False
            return None
        tensors = [m for m in metas if isinstance(m, dict) and m.get("kind") == "tensor"]
        if len(tensors) != len(blobs) or not all(isinstance(m, dict) and m.get("kind") in ("tensor", "value")
                                                 for m in metas):
            self.cacheable = False
            return None
        try:
            for m, b in zip(tensors, blobs):
                decode(m, b)  # sizes agree with dtype and shape
        except BadOutput:
            self.cacheable = False
            return None
        self.ref_inputs[name] = {"model_key": str(header.get("model_key")), "inputs": metas, "out_specs": specs,
                                 "blobs": blobs}
        return None

    def _tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype in _HALF:
            return float(self.s["half_atol"]), float(self.s["half_rtol"])
        return float(self.s["atol"]), float(self.s["rtol"])

    def _cand(self, header: dict[str, Any], blobs: list[bytearray]) -> str | None:
        name = str(header.get("name"))
        ref = self.refs.get(name)
        if ref is None or name in self.results or self.passed == "static":
            return self._fail("protocol_error", f"unexpected candidate outputs for {name[:40]!r}")
        stage = ref["stage"]
        entry: dict[str, Any] = {"name": name, "stage": stage, "inputs": ref["inputs"]}
        self.results[name] = entry

        # facts measured during forward, judged against the policy
        launches = header.get("launches")
        foreign = header.get("foreign") or {}
        ops = header.get("ops") or {}
        if not isinstance(launches, int) or not isinstance(foreign, dict) or not isinstance(ops, dict):
            return self._fail("protocol_error", "malformed candidate message")
        entry["launches"] = launches
        entry["kernels"] = {str(k)[:80]: v for k, v in list((header.get("kernels") or {}).items())[:20]}
        for kernel in list(foreign)[:MAX_FLAGS_LISTED]:
            self._flag(f"foreign_kernel:{str(kernel)[:80]}", f"forward launched Triton kernel {kernel}, which is not "
                       "defined in the solution's module")
        if launches <= 0 and not foreign:
            self._flag("no_triton_launch", f"forward launched no Triton kernel on the {name} inputs")
        from .policy import runtime_op_allowed

        forbidden = sorted(str(op) for op in ops if not runtime_op_allowed(self.policy, str(op)))
        for op in forbidden[:MAX_FLAGS_LISTED]:
            self._flag(f"pytorch_compute:{op[:80]}", f"forward ran PyTorch op {op} ({ops[op]}x), which the "
                       f"{self.policy!r} policy leaves to Triton; ops seen: {', '.join(sorted(map(str, ops)))[:600]}")
        if header.get("inputs_unchanged") is not True:
            self._flag("input_mutated", f"forward changed its inputs in place on the {name} inputs")

        metas = header.get("outputs")
        if not isinstance(metas, list):
            return self._fail("protocol_error", "malformed candidate outputs")
        n_tensors = sum(1 for m in metas if isinstance(m, dict) and m.get("kind") == "tensor")
        if n_tensors != len(blobs):
            return self._fail("protocol_error", "candidate outputs and data do not match")
        cached_from = [other for other, seen in self.cand_outputs.items()
                       if same_bytes(seen, blobs) and not same_bytes(self.refs[other]["blobs"], ref["blobs"])]
        self.cand_outputs[name] = blobs
        if cached_from:
            self._flag("cached_output", f"forward returned bit-identical outputs for the {name} and {cached_from[0]} "
                       "inputs, whose reference outputs differ")
        if self.flags:
            entry["ok"] = False
            return "stop"

        if len(metas) != len(ref["metas"]):
            entry.update(ok=False, reason="shape_mismatch")
            return self._fail("shape_mismatch", f"{name}: forward returned {len(metas)} outputs, the reference "
                              f"{len(ref['metas'])}", stage)
        blob_iter = iter(blobs)
        results = []
        for i, (rm, rb, cm) in enumerate(zip(ref["metas"], ref["blobs"], metas)):
            cb = next(blob_iter) if isinstance(cm, dict) and cm.get("kind") == "tensor" else b""
            atol, rtol = self._tolerance(rm["dtype"])
            grow = self._magnitude_growth(name, i)
            if grow > 1.0:
                atol *= grow
                entry["atol_scaled"] = round(grow, 3)
            r = compare(rm, rb, cm if isinstance(cm, dict) else {}, cb, atol, rtol)
            if not r["ok"] and r.get("reason") == "mismatch" and ref.get("alt"):
                r2 = compare(rm, ref["alt"][i], cm, cb, atol, rtol)
                if r2["ok"]:
                    r = {**r2, "matched": "float32-accumulated reference"}
            r["output"] = i
            results.append(r)
        entry["max_abs"] = max((r.get("max_abs", 0.0) for r in results), default=0.0)
        entry["max_rel"] = max((r.get("max_rel", 0.0) for r in results), default=0.0)
        entry["shape"] = results[0].get("shape") if len(results) == 1 else [r.get("shape") for r in results]
        entry["dtype"] = results[0].get("dtype") if len(results) == 1 else [r.get("dtype") for r in results]
        if any(r.get("matched") for r in results):
            entry["matched"] = "float32-accumulated reference"  # said in the verdict, for people to see
        bad = next((r for r in results if not r["ok"]), None)
        entry["ok"] = bad is None
        if bad is None:
            return None
        reason = bad["reason"]
        entry["reason"] = reason
        entry["detail"] = bad["detail"]
        where = f"{name} inputs ({ref['inputs']})" + (f", output {bad['output']}" if len(results) > 1 else "")
        if reason == "mismatch":
            reason = f"mismatch:{name}"
        return self._fail(reason, f"{bad['detail']} on the {where}", stage)

    @contextmanager
    def _worker_time(self) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.worker_s += time.monotonic() - t0

    def _phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self._phase_from, 3)
        self._phase_from = now

    def _magnitude_growth(self, name: str, i: int) -> float:
        """How much larger output `i` is on input set `name` than on the original inputs (mean absolute
        value of the trusted references, at least 1). The absolute tolerance grows with it: atol is
        meant for outputs of the original's size, and an input set whose outputs are 4x larger (a
        matmul on inputs scaled x2) would otherwise be held to a 4x stricter standard; a float32 matmul
        that uses TF32, as Triton's tl.dot does by default, passes the original and failed there."""
        if name == "original" or name.startswith("dtype:") or "original" not in self.refs:
            return 1.0
        base, this = self.refs["original"], self.refs[name]
        if i >= len(base["metas"]) or i >= len(this["metas"]) or \
                not base["metas"][i].get("dtype") == this["metas"][i].get("dtype") not in _EXACT:
            return 1.0
        m0, m1 = self._magnitude("original", i), self._magnitude(name, i)
        return min(m1 / m0, MAX_ATOL_GROWTH) if m0 > 0 and m1 > m0 else 1.0

    def _magnitude(self, name: str, i: int) -> float:
        ref = self.refs[name]
        sent = ref.get("magnitudes")
        if sent is not None:
            return sent[i]
        return _mean_abs(ref["metas"][i], ref["blobs"][i])

    def _gate(self, stage: str) -> str:
        expected = [n for n, r in self.refs.items() if r["stage"] == stage]
        if stage not in ("tiny", "full") or not expected:
            return self._fail("protocol_error", f"gate for unknown stage {stage[:20]!r}")
        missing = [n for n in expected if not self.results.get(n, {}).get("ok")]
        if missing or self.failure or self.flags:
            return self._fail("protocol_error", f"stage {stage} ended without outputs for {', '.join(missing)}")
        if stage_index(self.passed) != stage_index(stage) - 1:
            return self._fail("protocol_error", f"stage {stage} out of order")
        self.passed = stage
        self._phase(stage)
        return "go"

    def _child_error(self, header: dict[str, Any]) -> str:
        reason = str(header.get("reason", "runtime_error"))
        if reason not in _CHILD_REASONS:
            reason = "runtime_error"
        stage = str(header.get("stage", ""))
        if reason == "compile_error" and stage in ("tiny", "full"):
            # a Triton kernel that fails to compile at a launch did not pass "compile", whichever input
            # set made that launch: one definition on both devices (see compile_check.py)
            self.passed = "static"
        error = str(header.get("error", ""))[-3000:]
        variation = header.get("variation")
        if variation:
            error = f"on the {str(variation)[:40]} inputs:\n{error}"
        return self._fail(reason, error, stage)

    def _timing(self, header: dict[str, Any]) -> str | None:
        if self.passed != "full":
            return self._fail("protocol_error", "timing before the full stage passed")
        try:
            stats = speedup_stats(list(header.get("ref_ms") or []), list(header.get("cand_ms") or []),
                                  float(self.s.get("timing_trim", 0.1)))
        except (TypeError, ValueError) as e:
            self.notes.append(f"timing failed: {e}")
            return None
        stats["device"] = str(header.get("device_name", ""))[:100]
        stats["warmup"] = int(self.s.get("timing_warmup", 10))
        wait = header.get("gpu_wait_s")
        if isinstance(wait, (int, float)) and 0 <= wait < 1e6:
            stats["gpu_wait_s"] = round(float(wait), 3)  # how long it waited for the GPU to itself
        self.timing = stats
        self.passed = "timing"
        self._phase("timing")
        return None

    # ---------------------------------------------------------------- the verdict

    def finalize(self, outcome: SandboxOutcome) -> dict[str, Any]:
        v = Verdict(task_id=self.job.get("task_id", ""), notes=list(self.notes))
        error = ""
        if self.failure is not None:
            reason, error = self.failure
        elif outcome.kill_reason and outcome.kill_reason != "judged":
            reason, error = outcome.kill_reason, outcome.detail
        elif not self.done:
            reason, error = _exit_reason(outcome.exit_status)
        elif outcome.leftover_processes:
            reason = "fork_flood"
            error = f"{outcome.leftover_processes} processes were still alive after the candidate's process exited"
        elif stage_index(self.passed) < stage_index("full"):
            reason, error = "protocol_error", "the candidate's process finished without passing every stage"
        else:
            reason = "ok"
        if reason == "fork_flood" and "fork_flood" not in self.flags:
            self.flags.append("fork_flood")  # processes of its own: never a correct solution
        if outcome.leftover_processes and reason != "fork_flood":
            v.notes.append(f"{outcome.leftover_processes} leftover processes killed")
        if reason in ("memory_limit", "out_of_memory") and outcome.peak_rss_mb:
            v.notes.append(f"peak resident memory {outcome.peak_rss_mb:.0f} MiB")
        if reason not in ("ok",) and outcome.log_tail.strip() and reason not in ("cheat:no_triton_launch",):
            tail = outcome.log_tail.strip()[-1500:]
            if tail and tail not in error:
                error = (error + "\n--- candidate output (tail) ---\n" + tail).strip()

        v.cheat_flags = list(self.flags)
        v.stage = self.passed
        if stage_index(self.passed) >= stage_index("full") and not self.flags:
            v.correct = True
            if reason != "ok":  # failed while timing: still correct, but no speed number
                reason = f"timing_failed:{reason}"
        v.reason = reason if _REASON.match(reason) else "runtime_error"
        v.error = error[-4000:]
        v.errors = [self.results[n] for n in self.refs if n in self.results]
        if self.timing is not None and not self.flags:
            v.timing = self.timing
            v.ref_time_ms = self.timing["reference"]["trimmed_mean_ms"]
            v.kernel_time_ms = self.timing["candidate"]["trimmed_mean_ms"]
            v.speedup = self.timing["speedup"]
            review = float(self.s.get("speedup_review", 10.0))
            if v.speedup > review:
                v.review = True
                v.notes.append(f"speedup {v.speedup:.1f}x is above the review threshold of {review:g}x: "
                               "check the kernel by hand")
        elif v.correct and not self.s.get("timing_enabled"):
            v.notes.append(self.s.get("timing_note") or "timing skipped")
        v.reward = compute_reward(v.stage, v.cheat_flags, v.speedup, float(self.s.get("partial_credit", 1.0)))
        v.duration_s = round(time.monotonic() - self.started, 3)
        self.mark("end")
        v.phases = {**self.phases, "worker_s": round(self.worker_s, 3), **self.trace}
        if self.preloaded:
            v.phases["reference_cached"] = 1.0  # this worker's copy of the task's reference phase
        if outcome.prestarted:
            v.phases["prestarted"] = 1.0  # ran in the worker's spare child (sandbox.Spare)
        return v.to_dict()


def _mean_abs(meta: dict[str, Any], blob: bytes | bytearray) -> float:
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


def _exit_reason(status: int | None) -> tuple[str, str]:
    if status is None:
        return "process_exit", "the candidate's process vanished"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"SIG{sig}"
        return f"crash_signal:{name}", f"the candidate's process was killed by {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return "process_exit", f"the candidate's process exited (code {code}) without a result"


# --------------------------------------------------------------------------- one job, in the worker


_BUILDERS: dict[str, NativeBuilder] = {}
_REFERENCES = ReferenceCache(0)


@functools.cache
def _memory_total() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def memory_share_bytes(workers: int | None = None) -> int | None:
    """This worker's share of a quarter of the machine's memory (the pool's workers split it)."""
    total = _memory_total()
    if total is None:
        return None
    if workers is None:
        workers = int(os.environ.get("TRITONRL_POOL_WORKERS") or 1)
    return total // 4 // max(1, workers)


def _reference_cache(max_mb: int) -> ReferenceCache:
    """The worker's one reference cache, resized to the job's setting, capped at its share of the
    machine's memory (0 empties and disables it)."""
    share = memory_share_bytes()
    _REFERENCES.max_bytes = min(max(0, max_mb) << 20, share if share is not None else 1 << 62)
    if not _REFERENCES.max_bytes:
        _REFERENCES.clear()
    return _REFERENCES


def share_reference(conn: Any, key: str, entry: Any) -> None:
    """Hand a new record of this worker's reference cache to the pool, for the other workers of
    this GPU (reference_cache.PoolStore); a failure only means they run that reference phase too."""
    exported = export_reference(entry)
    if exported is None:
        return
    desc, fds = exported
    try:
        send_record(conn, {"type": "reference", "key": key, "desc": desc}, fds)
    except (OSError, ValueError):
        pass


def adopt_reference(conn: Any, msg: dict[str, Any]) -> None:
    """A record from the pool (another worker's, see share_reference) into this worker's cache."""
    fds = recv_fds(conn, int(msg.get("nfds") or 0))
    _reference_cache(int(msg.get("max_mb") or 0)).adopt(str(msg.get("key")), msg.get("desc") or {}, fds)


def reference_keys() -> list[str]:
    """The keys this worker's reference cache holds now (the pool's picture of it)."""
    return list(_REFERENCES.entries)


def _builder(base_dir: str) -> NativeBuilder:
    """One builder per worker (its folder lives and dies with the worker's temp dir)."""
    if base_dir not in _BUILDERS:
        _BUILDERS[base_dir] = NativeBuilder(os.path.join(base_dir, "native"))
    return _BUILDERS[base_dir]


def prestart_wanted(settings: dict[str, Any], device: str) -> bool:
    """`verify.prestart_child`: auto = on a GPU only (a CPU child has no context to create)."""
    mode = settings.get("prestart_child", "auto")
    return mode == "on" or (mode == "auto" and device == "cuda")


def spares_wanted(settings: dict[str, Any], queued: int | None) -> int:
    """How many spares to keep started: `verify.spare_children`, but no more than this worker's share
    of the jobs still queued in the pool (`queued`, when the pool says), and one at least (for the
    next call): a spare nobody will use only competes with the candidates' own CUDA contexts, which
    the driver creates one at a time."""
    count = max(1, int(settings.get("spare_children") or 1))
    if queued is None:
        return count
    workers = max(1, int(os.environ.get("TRITONRL_POOL_WORKERS") or 1))
    return min(count, max(1, -(-max(0, int(queued)) // workers)))


def run_job(job: dict[str, Any], base_dir: str, conn: Any = None, queued: int | None = None) -> dict[str, Any]:
    """Verify one candidate in a fresh child of this worker; returns a Verdict as a dict. `queued`:
    how many jobs the pool still holds after this one (None: unknown)."""
    from .stages import child_main, warm_child

    workdir = tempfile.mkdtemp(prefix="cand-", dir=base_dir)
    judge = Judge(job, _builder(base_dir) if job["device"] == "cuda" else None)
    s = job["settings"]
    refs = _reference_cache(int(s.get("reference_cache_mb") or 0))
    key = cache_key(job)
    entry = refs.get(key) if refs.max_bytes else None
    child_job, inherit = job, ()
    if entry is not None:
        judge.preload(entry.refs, entry.notes)
        child_job, inherit = {**job, "reference_cache": entry.child_view()}, tuple(entry.fds)
    elif refs.max_bytes:
        child_job = {**job, "collect_reference": True}
    limits = Limits(timeout_s=float(s["timeout_s"]), memory_limit_mb=int(s["memory_limit_mb"]),
                    cap_address_space=job["device"] == "cpu",
                    max_transfer_bytes=max(1 << 30, 4 * (int(s["memory_limit_mb"]) << 20)))

    def started(pid: int) -> None:
        judge.mark("launched")
        if conn is not None:
            try:
                conn.send({"type": "started", "child": pid})
            except (OSError, ValueError):
                pass

    if s.get("compile_check") == "full":
        warm_full_pipeline()  # once per worker: children inherit a warm LLVM and ptxas
    # this candidate runs in the oldest spare started during the last ones (if any); new ones start
    # once its process is set up
    spare = SPARES.take()
    prestart = prestart_wanted(s, job["device"])
    if not prestart and spare is not None:
        spare.discard()
        SPARES.drop()
        spare = None

    def refill() -> list[tuple[int, int]]:
        if not prestart:
            return []
        started = SPARES.refill(child_main, functools.partial(warm_child, job["device"]),
                                count=spares_wanted(s, queued))
        return [x.identity for x in started]

    try:
        outcome = run_sandboxed(lambda ch: child_main(child_job, ch), judge.on_message, limits, workdir,
                                watch_fd=conn.fileno() if conn is not None else None, on_start=started,
                                inherit_fds=inherit, spare=spare, payload=child_job,
                                apart=tuple(x.identity for x in SPARES.spares), on_running=refill)
        verdict = judge.finalize(outcome)
        if entry is None and refs.max_bytes:
            record = judge.reference_record()
            stored = refs.put(key, record) if record is not None else None
            if stored is not None and conn is not None:
                share_reference(conn, key, stored)
        return verdict
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

