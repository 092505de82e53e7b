"""The trusted side of a verification: turns what a candidate's process sent into a Verdict.

The worker feeds every framed message of the child to a `Judge`. Reference outputs are accepted
only before `ref_done` (the candidate is imported after it), so the candidate cannot have touched
them. Candidate outputs are compared with the reference's on raw bytes (compare.py), by the
standard of standard.py (tolerances by dtype, the absolute one grown with the outputs' magnitude,
the float32-accumulated reference as a second answer for half outputs). The facts the child measured (Triton
launches, the aten-op census, inputs unchanged) are judged here against the policy. The
first failure stops the child at once; a stage gate is answered "go" only when every output of
that stage was right. A `compile_error` reported from the tiny or full stage (a launch Triton
rejects, on either device) means the candidate did not pass compile: stage "static", reward 0.
"""

from __future__ import annotations

import math
import os
import re
import signal
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from .. import reasons as R
from ..candidate.timing import speedup_stats
from ..precision import TF32, float32_heavy
from ..reward import compute_reward
from ..sandbox import messages as M
from ..sandbox.run import JUDGED
from ..settings import JobSettings
from ..static import candidate_precision
from ..verdict import Verdict, stage_index
from .compare import BadOutput, decode, same_bytes
from .facts import call_findings, guard_findings
from .standard import MAX_ATOL_GROWTH, OutputStandard
from .trace_marks import add_holds, add_mark

if TYPE_CHECKING:
    from ..compilation.native_builds import NativeBuilder
    from ..sandbox.run import SandboxOutcome

GROWTH_MARGIN = 1.05  # on a learnt tiny-set atol growth (a prescreen's bound)


class Judge:
    """One candidate's verdict in the making: `on_message` for each frame of its process (the
    sandbox acts on the answer: "go", "stop", "final" or a JSON reply), `finalize` once it ended."""

    def __init__(self, job: M.Job, builder: NativeBuilder | None = None):
        self.job = job
        self.builder = builder  # the worker's builds of Triton's C modules (native_builds.py)
        self.build_requests = 0
        self.settings = JobSettings.from_json(job["settings"])
        self.policy = job["policy"]
        # "tf32": a launched kernel's tl.dot may run in TF32 (precision.py); it counts once the reference is
        # known to run float32 GEMMs or convolutions (`precision`). The pool's static check found it; a
        # job made otherwise has its code read here
        given = job.get("precision")
        self.dot_precision = given if isinstance(given, str) else candidate_precision(str(job.get("code") or ""))
        self.extra_ops = tuple(job.get("extra_ops") or ())
        self.prescreen = bool(job.get("prescreen"))  # the tiny set alone (worker/job.py): never correct
        # how much the full run grows the tiny set's atol on this task, where the pool learnt it from an earlier
        # full run (standard.tiny_growth), with a margin: references may differ between runs within 1e-3
        # (reference_phase), so may the growth; else the most it can be
        grown = job.get("tiny_growth")
        self.tiny_bound = min(float(grown) * GROWTH_MARGIN, MAX_ATOL_GROWTH) \
            if isinstance(grown, (int, float)) and 1.0 <= grown <= MAX_ATOL_GROWTH else MAX_ATOL_GROWTH
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
        self.timed_checked = 0  # outputs of timed calls checked (all right)
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
                (self.failure is not None and self.failure[0] in (R.REFERENCE_ERROR, R.INTERNAL_ERROR)) or \
                set(self.ref_inputs) != set(self.refs):
            return None
        return {"refs": self.refs, "notes": list(self.ref_notes), "models": self.ref_models,
                "sets": [{"name": n, "stage": self.refs[n]["stage"], **self.ref_inputs[n]} for n in self.refs]}

    # ---------------------------------------------------------------- messages

    def on_message(self, header: dict[str, Any], blobs: list[bytearray]) -> str | dict[str, str] | None:
        kind = header.get("type")
        try:
            if kind == M.BUILD:  # not part of the verdict: Triton in the child wants a C module built
                if self.builder is None:
                    return {"error": "this worker does not build modules"}
                self.build_requests += 1
                return self.builder.answer(header, self.build_requests - 1)
            if kind == M.MARK:
                if isinstance(header.get("holds"), list):
                    self._mark_holds(header["holds"])
                else:
                    self.mark(str(header.get("label", ""))[:40], header.get("t"), header.get("lock_wait"),
                              header.get("cpu"))
                return None
            if kind == M.SETUP_DONE:  # the sandbox's clocks act on it; nothing for the verdict
                return None
            if kind == M.INTERNAL_ERROR:  # the verifier's own code in the child failed, whenever it did
                return self._fail(R.INTERNAL_ERROR, str(header.get("error", ""))[-3000:])
            if kind == M.NOTE:
                if len(self.notes) < 50:
                    self.notes.append(str(header.get("text", ""))[:300])
                    if not self.ref_done:
                        self.ref_notes.append(self.notes[-1])
                return None
            if kind == M.TAMPERED:  # the channel's own report (protocol.ChildChannel): never the candidate's
                changed = [str(n)[:80] for n in (header.get("namespaces") or [])[:8]] or ["?"]
                return self._flag(f"{R.MONKEYPATCH}:{changed[0]}", f"the candidate's process wrote into "
                                  f"{', '.join(changed)}, whose functions the verifier's own code in that process "
                                  "runs: its census, checks and messages may have been rewritten")
            if kind in (M.REF_INPUTS, M.REF_MODELS, M.REF_UNCACHEABLE, M.REF_RESET):
                if self.ref_done:
                    return self._fail(R.PROTOCOL_ERROR, f"{kind} after the reference was done")
                return self._reference_cache_message(kind, header, blobs)
            if kind == M.REF:
                with self._worker_time():
                    return self._ref(header, blobs)
            if kind == M.REF_ERROR:
                return self._fail(R.REFERENCE_ERROR,
                                  "the task's reference failed:\n" + str(header.get("error", ""))[-3000:])
            if kind == M.REF_RANDOM:
                return self._fail(R.REFERENCE_RANDOM, str(header.get("error", ""))[-3000:])
            if kind == M.REF_FOOTPRINT:
                if self.ref_done:
                    return self._fail(R.PROTOCOL_ERROR, f"{M.REF_FOOTPRINT} after the reference was done")
                peak = header.get("peak_bytes")
                if isinstance(peak, int) and 0 <= peak < 1 << 50:
                    self.phases["reference_peak_gib"] = round(peak / (1 << 30), 3)
                return None
            if kind == M.REF_DONE:
                self.phase("reference")
                self.ref_done = True
                if "original" not in self.refs and not self.prescreen:
                    return self._fail(R.REFERENCE_ERROR, "no reference outputs for the original inputs")
                return None
            if not self.ref_done:
                return self._fail(R.PROTOCOL_ERROR, f"message {kind!r} before the reference was done")
            if kind == M.STAGE and header.get("stage") == "compile" and self.passed == "static":
                self.phase("compile")
                self.passed = "compile"
                return None
            if kind == M.CAND:
                with self._worker_time():
                    return self._cand(header, blobs)
            if kind == M.CAND_SKIP:
                return self._cand_skip(header)
            if kind == M.GATE:
                return self._gate(str(header.get("stage")))
            if kind == M.ERROR:
                return self._child_error(header)
            if kind == M.TIMED:
                with self._worker_time():
                    return self._timed(header, blobs)
            if kind == M.TIMING:
                return self._timing(header)
            if kind == M.DONE:
                self.done = True
                self.mark("done")
                return "final"  # nothing follows: the sandbox ends the process without waiting for its exit
            return self._fail(R.PROTOCOL_ERROR, f"unexpected message {str(kind)[:40]!r}")
        except BadOutput as e:
            return self._fail(R.PROTOCOL_ERROR, str(e))

    def mark(self, label: str, t: Any = None, lock_wait: Any = None, cpu: Any = None) -> None:
        """A point of this candidate's run (trace_marks.py), only with TRITONRL_TRACE set."""
        if self.tracing:
            add_mark(self.trace, label, t, lock_wait, cpu)

    def _mark_holds(self, holds: list[Any]) -> None:
        if self.tracing:
            add_holds(self.trace, holds)

    def _fail(self, reason: str, error: str, stage: str | None = None) -> str:
        if self.failure is None:
            self.failure = (reason, error)
            self.failure_stage = stage
        return "stop"

    def _flag(self, flag: str, error: str) -> str:
        flag = re.sub(r"[^A-Za-z0-9_.:\-]", "_", flag)[:120]  # kernel and op names end up in reasons
        if flag not in self.flags:
            self.flags.append(flag)
        return self._fail(R.cheat(flag), error)

    def _ref(self, header: dict[str, Any], blobs: list[bytearray]) -> str | None:
        if self.ref_done:
            return self._fail(R.PROTOCOL_ERROR, "reference outputs sent after the candidate was imported")
        name, stage = str(header.get("name")), header.get("stage")
        metas = header.get("outputs")
        if stage not in ("tiny", "full", "timed") or not isinstance(metas, list) or name in self.refs or \
                (stage == "timed") != name.startswith("timed:"):
            return self._fail(R.INTERNAL_ERROR, f"malformed reference message for {name}")
        # a half-precision input set may carry a second, equally valid reference: the same model run
        # in float32 on the same rounded inputs (PyTorch's own half kernels, scans on CUDA among
        # them, may accumulate in half; a kernel that accumulates in float32 is right, not wrong)
        alt = header.get("alt_outputs")
        n_alt = len(alt) if isinstance(alt, list) else 0
        tensors = [m for m in metas if isinstance(m, dict) and m.get("kind") == "tensor"]
        if len(tensors) != len(metas) or len(blobs) != len(metas) + n_alt:
            return self._fail(R.REFERENCE_ERROR, f"the reference's outputs for {name} are not all tensors")
        if n_alt and (n_alt != len(metas) or any(not isinstance(a, dict) or a.get("kind") != "tensor"
                                                 or a.get("dtype") != m.get("dtype") or a.get("shape") != m.get("shape")
                                                 for a, m in zip(alt, metas))):
            return self._fail(R.INTERNAL_ERROR, f"malformed alternative reference for {name}")
        for m, b in zip(metas + (alt if n_alt else []), blobs):
            decode(m, b)  # validates sizes
        main = blobs[:len(metas)]
        mags = header.get("magnitudes")  # mean |output| per output, measured in the child (trusted here)
        if not (isinstance(mags, list) and len(mags) == len(metas) and all(
                isinstance(m, (int, float)) and not isinstance(m, bool) and 0 <= m < float("inf") for m in mags)):
            mags = None
        tf32 = header.get("tf32_error")  # TF32's own error per output (precision.py), measured in the child
        if not (isinstance(tf32, list) and len(tf32) == len(metas)):
            tf32 = None
        dtypes = header.get("heavy_dtypes")
        if not (isinstance(dtypes, dict) and all(isinstance(v, list) and all(isinstance(d, str) for d in v)
                                                 for v in dtypes.values())):
            dtypes = None
        self.refs[name] = {"stage": stage, "metas": metas, "blobs": main, "magnitudes": mags,
                           "alt": blobs[len(metas):] if n_alt else None,
                           "inputs": str(header.get("inputs", ""))[:300], "heavy_ops": header.get("heavy_ops"),
                           "heavy_dtypes": dtypes, "tf32": tf32}
        return None

    @property
    def precision(self) -> str:
        """"tf32" when the solution's tl.dot may run in TF32 and the reference runs float32 GEMMs or
        convolutions (precision.py); "" otherwise."""
        ref = self.refs.get("original") or (self.refs.get("tiny") if self.prescreen else None)
        if self.dot_precision == TF32 and ref is not None and float32_heavy(ref.get("heavy_dtypes")):
            return TF32
        return ""

    def _reference_cache_message(self, kind: str, header: dict[str, Any], blobs: list[Any]) -> str | None:
        if kind == M.REF_RESET:  # the child found the cached reference does not fit its models
            if self.preloaded:
                del self.notes[:self._preloaded_notes]
                self.refs, self.preloaded = {}, False
            return None
        if kind == M.REF_UNCACHEABLE:
            self.cacheable = False
            return None
        if kind == M.REF_MODELS:
            digests = header.get("digests")
            if isinstance(digests, dict) and all(isinstance(v, str) for v in digests.values()):
                tiny = header.get("tiny_overrides")
                self.ref_models = {"digests": digests, "tiny_overrides": tiny if isinstance(tiny, dict) else None,
                                   "eval_mode": header.get("eval_mode") is True}
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

    def _process_facts(self, header: dict[str, Any], where: str) -> None:
        """The guard's refusals, callables replaced and global state changed (candidate_phase.guard_facts):
        each a cheat flag, whatever else the message says (facts.guard_findings)."""
        for flag, error in guard_findings(header, where):
            self._flag(flag, error)

    def _timed(self, header: dict[str, Any], blobs: list[bytearray]) -> str | None:
        """An output of a timed call, on the original inputs: held to the original's reference."""
        which = str(header.get("set"))
        if which not in self.refs or not (which == "original" or self.refs[which]["stage"] == "timed"):
            which = "original"
        if self.passed != "full" or which not in self.refs:
            return self._fail(R.PROTOCOL_ERROR, "timed outputs before the full stage passed")
        ref = self.refs[which]
        metas = header.get("outputs")
        if not isinstance(metas, list) or len(metas) != len(ref["metas"]) or len(blobs) != len(metas):
            return self._flag(R.TIMED_OUTPUT, "a timed call returned other outputs than the same inputs did "
                              "before timing")
        standard = self._standard()
        for i, (cm, cb) in enumerate(zip(metas, blobs)):
            r = standard.held_to_reference(which, i, cm if isinstance(cm, dict) else {}, cb)
            if not r["ok"]:
                return self._flag(R.TIMED_OUTPUT, f"the output of timed call {header.get('trial')} is wrong on "
                                  f"its inputs ({which}: {r.get('detail', r.get('reason'))}), inputs drawn as the "
                                  "task draws them and checked as the full stage's were: behaviour that changes "
                                  "once timed, or an answer remembered from other inputs")
        self.timed_checked += 1
        return None

    def _cand(self, header: dict[str, Any], blobs: list[bytearray]) -> str | None:
        name = str(header.get("name"))
        ref = self.refs.get(name)
        if ref is None or name in self.results or self.passed == "static":
            return self._fail(R.PROTOCOL_ERROR, f"unexpected candidate outputs for {name[:40]!r}")
        stage = ref["stage"]
        entry: dict[str, Any] = {"name": name, "stage": stage, "inputs": ref["inputs"]}
        self.results[name] = entry

        # facts measured during forward, judged against the policy (facts.py)
        launches = header.get("launches")
        if not isinstance(launches, int) or not isinstance(header.get("foreign") or {}, dict) \
                or not isinstance(header.get("ops") or {}, dict):
            return self._fail(R.PROTOCOL_ERROR, "malformed candidate message")
        entry["launches"] = launches
        entry["kernels"] = {str(k)[:80]: v for k, v in list((header.get("kernels") or {}).items())[:20]}
        for flag, error in call_findings(header, name, ref, self.policy, self.extra_ops):
            self._flag(flag, error)

        metas = header.get("outputs")
        if not isinstance(metas, list):
            return self._fail(R.PROTOCOL_ERROR, "malformed candidate outputs")
        n_tensors = sum(1 for m in metas if isinstance(m, dict) and m.get("kind") == "tensor")
        if n_tensors != len(blobs):
            return self._fail(R.PROTOCOL_ERROR, "candidate outputs and data do not match")
        standard = self._standard()
        # an output of another dtype than this set's reference is that, not a cached answer (compare.py)
        same_dtypes = [m.get("dtype") for m in metas if isinstance(m, dict)] == \
            [m.get("dtype") for m in ref["metas"]]
        cached_from = [other for other, seen in self.cand_outputs.items()
                       if same_dtypes and same_bytes(seen, blobs) and standard.references_differ(other, name)]
        if cached_from and standard.right_on(name, metas, blobs):
            # right on this set by its own standard as well: one answer fits both sets' references (a
            # float32 output on half inputs that are exact in half, an offset-blind output), so not cached
            cached_from = []
        self.cand_outputs[name] = blobs
        if cached_from:
            self._flag(R.CACHED_OUTPUT, f"forward returned bit-identical outputs for the {name} and {cached_from[0]} "
                       "inputs, whose reference outputs differ")
        elif header.get("foreign_memory"):
            self._flag(R.NOT_PLAIN_OUTPUT, f"forward returned a tensor over memory torch did not allocate (numpy, "
                       f"a foreign buffer) on the {name} inputs: made outside torch and Triton")
        if self.flags:
            entry["ok"] = False
            return "stop"

        if len(metas) != len(ref["metas"]):
            entry.update(ok=False, reason=R.SHAPE_MISMATCH)
            return self._fail(R.SHAPE_MISMATCH, f"{name}: forward returned {len(metas)} outputs, the reference "
                              f"{len(ref['metas'])}", stage)
        results = standard.outputs_held(name, metas, blobs, entry)
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
        if bad.get("beyond_growth"):
            entry["beyond_growth"] = True  # a prescreen's mismatch the full run would find too (job.prescreen_final)
        where = f"{name} inputs ({ref['inputs']})" + (f", output {bad['output']}" if len(results) > 1 else "")
        if reason == R.MISMATCH:
            reason = R.mismatch(name)
        return self._fail(reason, f"{bad['detail']} on the {where}", stage)

    def _cand_skip(self, header: dict[str, Any]) -> str | None:
        """The candidate raised on a half-precision input set: only the task's own dtype is required,
        so the set counts as passed, with a note (never for another set, never with a flag)."""
        name = str(header.get("name"))
        ref = self.refs.get(name)
        if ref is None or not name.startswith("dtype:") or name in self.results or self.passed == "static":
            return self._fail(R.PROTOCOL_ERROR, f"unexpected skip of input set {name[:40]!r}")
        self._process_facts(header, name)
        if self.flags:
            return "stop"
        self.results[name] = {"name": name, "stage": ref["stage"], "inputs": ref["inputs"], "ok": True,
                              "skipped": True}
        first = (str(header.get("error") or "").strip().splitlines() or [""])[-1][:160]
        self.notes.append(f"variation {name} skipped: forward raised on {name[6:]} inputs ({first}); "
                          "only the task's own dtype is required")
        return None

    @contextmanager
    def _worker_time(self) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.worker_s += time.monotonic() - t0

    def phase(self, name: str) -> None:
        """`name` ends now: the seconds since the last phase ended (or the job began) are its."""
        now = time.monotonic()
        self.phases[name] = round(now - self._phase_from, 3)
        self._phase_from = now

    def _standard(self) -> OutputStandard:
        """What an output is held to (standard.py), over the references received so far."""
        return OutputStandard(self.refs, self.settings, tf32=self.precision == TF32,
                              tiny_bound=self.tiny_bound if self.prescreen else None)

    def _gate(self, stage: str) -> str:
        expected = [n for n, r in self.refs.items() if r["stage"] == stage]
        if stage not in ("tiny", "full") or not expected:
            return self._fail(R.PROTOCOL_ERROR, f"gate for unknown stage {stage[:20]!r}")
        missing = [n for n in expected if not self.results.get(n, {}).get("ok")]
        if missing or self.failure or self.flags:
            return self._fail(R.PROTOCOL_ERROR, f"stage {stage} ended without outputs for {', '.join(missing)}")
        if stage_index(self.passed) != stage_index(stage) - 1:
            return self._fail(R.PROTOCOL_ERROR, f"stage {stage} out of order")
        self.passed = stage
        self.phase(stage)
        return "go"

    def _child_error(self, header: dict[str, Any]) -> str:
        self._process_facts(header, str(header.get("variation") or header.get("stage") or "")[:40])
        if self.flags:
            return "stop"
        reason = str(header.get("reason", R.RUNTIME_ERROR))
        if reason == R.INTERNAL_ERROR and not self.ref_done:
            pass  # the verifier's own harness, before the candidate was imported: trusted
        elif reason not in R.CHILD_REASONS:  # the candidate's process may give only these (it is the candidate's)
            reason = R.RUNTIME_ERROR
        stage = str(header.get("stage", ""))
        if reason == R.COMPILE_ERROR and stage in ("tiny", "full"):
            # a Triton kernel that fails to compile at a launch did not pass "compile", whichever input
            # set made that launch: one definition on both devices (see compilation/errors.py)
            self.passed = "static"
        error = str(header.get("error", ""))[-3000:]
        variation = header.get("variation")
        if variation:
            error = f"on the {str(variation)[:40]} inputs:\n{error}"
        return self._fail(reason, error, stage)

    def _timing(self, header: dict[str, Any]) -> str | None:
        if self.passed != "full":
            return self._fail(R.PROTOCOL_ERROR, "timing before the full stage passed")
        self._process_facts(header, "timing")
        unordered = header.get("unordered")
        if isinstance(unordered, list) and unordered:
            self._flag(R.UNORDERED_STREAM, "a timed call's GPU work is not ordered with the timer's stream (it "
                       f"could run before the start event): {'; '.join(str(u)[:200] for u in unordered[:3])}")
        if self.flags:
            return "stop"
        trim = float(self.settings.timing_trim)
        try:
            stats = speedup_stats(list(header.get("ref_ms") or []), list(header.get("cand_ms") or []), trim)
        except (TypeError, ValueError) as e:
            self.notes.append(f"timing failed: {e}")
            return None
        if self.precision == TF32:
            # the speed of TF32 math is judged against the reference with TF32 allowed (precision-matched);
            # the speedup against the float32 reference is reported beside it
            try:
                matched = speedup_stats(list(header.get("ref_tf32_ms") or []), list(header.get("cand_ms") or []),
                                        trim)
            except (TypeError, ValueError):
                matched = None
            stats["precision"] = TF32
            stats["speedup_fp32_reference"] = stats["speedup"]
            if matched is not None:
                stats["reference_fp32"] = stats["reference"]
                stats["reference"] = matched["reference"]
                stats["speedup"], stats["speedup_median"] = matched["speedup"], matched["speedup_median"]
            else:
                self.notes.append("precision: tf32, but the reference with TF32 allowed was not timed: the speedup "
                                  "is against the float32 reference")
        stats["device"] = str(header.get("device_name", ""))[:100]
        stats["warmup"] = int(self.settings.timing_warmup)
        wait = header.get("gpu_wait_s")
        if isinstance(wait, (int, float)) and 0 <= wait < 1e6:
            stats["gpu_wait_s"] = round(float(wait), 3)  # how long it waited for the GPU to itself
        self.timing = stats
        self.passed = "timing"
        self.phase("timing")
        return None

    # ---------------------------------------------------------------- the verdict

    def finalize(self, outcome: SandboxOutcome) -> dict[str, Any]:
        v = Verdict(task_id=self.job.get("task_id", ""), notes=list(self.notes))
        error = ""
        if self.failure is not None:
            reason, error = self.failure
        elif outcome.kill_reason and outcome.kill_reason != JUDGED:
            reason, error = outcome.kill_reason, outcome.detail
        elif not self.done:
            reason, error = _exit_reason(outcome.exit_status)
        elif outcome.leftover_processes:
            reason = R.FORK_FLOOD
            error = f"{outcome.leftover_processes} processes were still alive after the candidate's process exited"
        elif stage_index(self.passed) < stage_index("full") and not self.prescreen:
            reason, error = R.PROTOCOL_ERROR, "the candidate's process finished without passing every stage"
        else:
            reason = R.OK
        if reason == R.FORK_FLOOD and R.FORK_FLOOD not in self.flags:
            self.flags.append(R.FORK_FLOOD)  # processes of its own: never a correct solution
        if outcome.leftover_processes and reason != R.FORK_FLOOD:
            v.notes.append(f"{outcome.leftover_processes} leftover processes killed")
        if reason in (R.MEMORY_LIMIT, R.OUT_OF_MEMORY) and outcome.peak_rss_mb:
            v.notes.append(f"peak resident memory {outcome.peak_rss_mb:.0f} MiB")
        if reason != R.OK and outcome.log_tail.strip() and reason != R.cheat(R.NO_TRITON_LAUNCH):
            tail = outcome.log_tail.strip()[-1500:]
            if tail and tail not in error:
                error = (error + "\n--- candidate output (tail) ---\n" + tail).strip()

        v.cheat_flags = list(self.flags)
        v.stage = self.passed
        if self.precision == TF32 and stage_index(self.passed) >= stage_index("tiny"):
            v.notes.append("precision: tf32 (the solution's tl.dot runs in TF32 on float32 operands: held to TF32's "
                           "own error on every input set; its speedup is against the reference with TF32 allowed)")
        if stage_index(self.passed) >= stage_index("full") and not self.flags and not self.prescreen:
            v.correct = True
            if reason != R.OK:  # failed while timing: still correct, but no speed number
                reason = R.timing_failed(reason)
        v.reason = R.check(reason)  # a reason not in the catalogue is a bug of ours: it fails loudly
        v.error = error[-4000:]
        stages = {"tiny": 0, "full": 1}  # the tiny set first, even where it ran the original's sizes after it
        v.errors = sorted((self.results[n] for n in self.refs if n in self.results),
                          key=lambda e: stages.get(e.get("stage"), 2))
        if self.timing is not None and not self.flags:
            v.timing = self.timing
            v.ref_time_ms = self.timing["reference"]["trimmed_mean_ms"]
            v.kernel_time_ms = self.timing["candidate"]["trimmed_mean_ms"]
            v.speedup = self.timing["speedup"]
            if self.timed_checked:
                v.notes.append(f"outputs of {self.timed_checked} timed calls checked against the reference")
            review = float(self.settings.speedup_review)
            if v.speedup > review:
                v.review = True
                v.notes.append(f"speedup {v.speedup:.1f}x is above the review threshold of {review:g}x: "
                               "check the kernel by hand")
        elif v.correct and not self.settings.timing_enabled:
            v.notes.append(self.settings.timing_note or "timing skipped")
        v.reward = compute_reward(v.stage, v.cheat_flags, v.speedup, float(self.settings.partial_credit))
        v.duration_s = round(time.monotonic() - self.started, 3)
        self.mark("end")
        v.phases = {**self.phases, "worker_s": round(self.worker_s, 3), **self.trace}
        if self.preloaded:
            v.phases["reference_cached"] = 1.0  # this worker's copy of the task's reference phase
        growth = self._standard().tiny_growth() if self.ref_done and not self.prescreen else None
        if growth is not None:
            v.phases["tiny_atol_growth"] = math.ceil(growth * 1e6) / 1e6  # for the pool's later prescreens: never less
        if outcome.prestarted:
            v.phases["prestarted"] = 1.0  # ran in the worker's spare child (spares.Spare)
        return v.to_dict()


def _exit_reason(status: int | None) -> tuple[str, str]:
    if status is None:
        return R.PROCESS_EXIT, "the candidate's process vanished"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"SIG{sig}"
        return R.crash_signal(name), f"the candidate's process was killed by {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return R.PROCESS_EXIT, f"the candidate's process exited (code {code}) without a result"
