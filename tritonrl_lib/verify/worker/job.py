"""One job in a worker: a candidate verified in its own process, judged, its reference phase kept.

`run_job` builds the `Judge`, picks the job's process (the oldest spare, else a fresh fork), runs
it under the job's limits (sandbox/run.py) and returns the verdict as a dict. A large task's job runs
the tiny set alone first (`_prescreen`): a candidate that fails there never waits for the full sizes. Around it live the
worker's singletons, one per worker process: its reference cache (reference_cache.py, shared with
the other workers of its GPU through the pool: `share_reference` / `adopt_reference`) and its
builder of Triton's C modules (native_builds.py).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from .. import reasons as R
from ..compilation.check import warm_full_pipeline
from ..compilation.native_builds import NativeBuilder
from ..reward import compute_reward
from ..sandbox import messages as M
from ..sandbox.footprint import Footprint, probe
from ..sandbox.limits import (GPU_MEMORY_FRACTION, Budget, Limits, gpu_sharers, host_share_bytes,
                              reference_cache_bytes)
from ..sandbox.run import run_sandboxed
from ..sandbox.spares import SPARES, prestart_wanted, spares_wanted
from ..settings import JobSettings
from ..verdict import Verdict
from .judge import Judge
from .reference_cache import ReferenceCache, cache_key, recv_fds, send_record
from .reference_cache import export as export_reference

# the worker's singletons: one per worker process (a forked child has copies it never uses)
_BUILDERS: dict[str, NativeBuilder] = {}
_REFERENCES = ReferenceCache(0)
_FOOTPRINTS: dict[str, Footprint | None] = {}  # task source digest -> its footprint (None: could not measure)
_GPU_BYTES: list[int | None] = []  # this worker's GPU's memory, once read


def task_footprint(source: str) -> Footprint | None:
    """The task's footprint, measured once per worker (footprint.probe, a throwaway fork)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _FOOTPRINTS:
        _FOOTPRINTS[key] = probe(source)
    return _FOOTPRINTS[key]


def gpu_bytes() -> int | None:
    """The memory of this worker's GPU, read once without touching CUDA in this process (nvidia-smi),
    or None."""
    if not _GPU_BYTES:
        total = None
        try:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            cmd = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
            if visible:
                cmd += ["-i", visible]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
            total = int(float(out[0])) << 20 if out else None
        except (OSError, ValueError, subprocess.SubprocessError):
            total = None
        _GPU_BYTES.append(total)
    return _GPU_BYTES[0]


def job_budget(job: M.Job, settings: Any) -> Budget:
    device = job["device"]
    fp = task_footprint(job["task_source"])
    sharers = gpu_sharers() if device == "cuda" else max(1, int(os.environ.get("TRITONRL_POOL_WORKERS") or 1))
    return Budget.for_task(fp, settings, device, gpu_bytes() if device == "cuda" else None, host_share_bytes(),
                           sharers)


def ask_exclusive(conn: Any, shares: int | None = None) -> bool:
    """Ask the pool for `shares` worker shares of this worker's GPU (None: all of it, or the host on the
    CPU) and wait until it says so: the pool stops handing out work there and answers once the jobs
    still running there leave that many shares free (limits.Budget.shares). False if it cannot."""
    try:
        conn.send({"type": M.EXCLUSIVE, **({"shares": int(shares)} if shares else {})})
        while True:
            msg = conn.recv()
            if isinstance(msg, dict) and msg.get("type") == M.EXCLUSIVE_GO:
                return True
            if isinstance(msg, dict) and msg.get("type") == M.REFERENCE:
                adopt_reference(conn, msg)
                continue
            if not isinstance(msg, dict) or msg.get("type") == M.STOP:
                return False
    except (EOFError, OSError, ValueError):
        return False


def _reference_cache(max_mb: int) -> ReferenceCache:
    """The worker's one reference cache, resized to the job's setting, capped at its share of the
    machine's memory (0 empties and disables it)."""
    _REFERENCES.max_bytes = reference_cache_bytes(max_mb)
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
        send_record(conn, M.ReferenceMessage(type=M.REFERENCE, key=key, desc=desc), fds)
    except (OSError, ValueError):
        pass


def adopt_reference(conn: Any, msg: M.ReferenceMessage) -> None:
    """A record from the pool (another worker's, see share_reference) into this worker's cache."""
    fds = recv_fds(conn, int(msg.get("nfds") or 0))
    _reference_cache(int(msg.get("max_mb") or 0)).adopt(str(msg.get("key")), msg.get("desc") or {}, fds)


def reference_keys() -> list[str]:
    """The keys this worker's reference cache holds now (the pool's picture of it)."""
    return list(_REFERENCES.entries)


def _new_judge(job: M.Job, base_dir: str) -> Judge:
    """A run's judge, with the worker's builder of Triton's C modules on a GPU."""
    return Judge(job, _builder(base_dir) if job["device"] == "cuda" else None)


def _builder(base_dir: str) -> NativeBuilder:
    """One builder per worker (its folder lives and dies with the worker's temp dir)."""
    if base_dir not in _BUILDERS:
        _BUILDERS[base_dir] = NativeBuilder(os.path.join(base_dir, "native"))
    return _BUILDERS[base_dir]


def run_job(job: M.Job, base_dir: str, conn: Any = None, queued: int | None = None) -> dict[str, Any]:
    """Verify one candidate in a fresh child of this worker; returns a Verdict as a dict. `queued`:
    how many jobs the pool still holds after this one (None: unknown)."""
    judge = _new_judge(job, base_dir)
    s = judge.settings
    budget = job_budget(job, s)
    if budget.too_large:
        return Verdict(task_id=job.get("task_id", ""), stage="static", reason=R.TASK_TOO_LARGE,
                       error=budget.too_large).to_dict()
    if prescreen_wanted(s.prescreen, budget):
        t0 = time.monotonic()
        screened = _prescreen(job, base_dir, conn, queued, budget, judge)
        if prescreen_final(screened):
            return screened
        # the full run's clocks start now (its precision as read once); the prescreen's time and whether
        # it passed are said apart
        judge = _new_judge({**job, "precision": judge.dot_precision}, base_dir)
        judge.phases["prescreen_s"] = round(time.monotonic() - t0, 3)
        judge.phases["prescreen_passed"] = float(screened.get("reason") == R.OK)
    limits = Limits.for_job(s, job["device"], budget)
    _send_limits(conn, limits)
    if budget.exclusive and conn is not None:
        if not ask_exclusive(conn, budget.shares):
            return Verdict(task_id=job.get("task_id", ""), stage="static", reason=R.INTERNAL_ERROR,
                           error="the pool did not give this task the shares of its GPU it needs").to_dict()
        # the wait for the GPU alone is a phase of its own: `reference` is then the reference's own work, not
        # the queue of a large problem's candidates before it
        judge.phase("gpu_alone_wait")
    # the child times the reference with TF32 allowed by the judge's precision (never reading the code itself)
    job = {**job, "budget": budget.to_json(), "precision": judge.dot_precision}
    verdict = _run_once(job, base_dir, conn, queued, judge, limits, budget)
    if ran_out_of_memory(verdict) and job["device"] == "cuda" and budget.shares < gpu_sharers() \
            and conn is not None:
        # the budget's model of the task fell short of what this run held: never a verdict of the shares'
        # size, the job runs again with the GPU to itself
        alone = dataclasses.replace(budget, exclusive=True, shares=gpu_sharers(), gpu_fraction=GPU_MEMORY_FRACTION)
        if ask_exclusive(conn):
            job = {**job, "budget": alone.to_json()}
            first = verdict.get("reason")
            verdict = _run_once(job, base_dir, conn, queued, _new_judge(job, base_dir), limits, alone)
            verdict.setdefault("notes", []).append(
                f"ran again with the GPU to itself: the first run ran out of GPU memory in this worker's "
                f"{'share' if budget.shares == 1 else f'{budget.shares} shares'} ({budget.gpu_fraction:.0%} of the "
                f"GPU; it ended {first})")
            budget = alone
    review = float(s.speedup_review)
    if verdict.get("correct") and isinstance(verdict.get("speedup"), (int, float)) and verdict["speedup"] > review:
        verdict = _remeasured(verdict, job, base_dir, conn, queued, limits, budget, review)
    if budget.note:
        verdict.setdefault("notes", []).append(f"budgets: {budget.note}")
    return verdict


PRESCREEN_MIN_BYTES = 1 << 30  # verify.prescreen=auto: tasks whose peak needs this much, or the GPU alone


def prescreen_wanted(mode: str, budget: Budget) -> bool:
    """Whether a job starts with a prescreen: always (on), never (off), or (auto) where the full run is
    expensive to start: a task that needs the GPU to itself or at least PRESCREEN_MIN_BYTES."""
    if mode in ("on", "off"):
        return mode == "on"
    return budget.exclusive or budget.need_bytes >= PRESCREEN_MIN_BYTES


def _prescreen(job: M.Job, base_dir: str, conn: Any, queued: int | None, budget: Budget,
               judge: Judge) -> dict[str, Any]:
    """The candidate on the task's tiny set alone, in a process of its own, within a worker's share (the
    GPU shared with the others, no reference phase at the task's sizes); its verdict. Where that is final
    (`prescreen_final`: a failure of the candidate's own that the full run, drawing the same tiny set
    first, would end on too) it says so; anything else is left to the full run (run_job): a prescreen
    never passes anything."""
    small = dataclasses.replace(budget, exclusive=False, shares=1, cacheable_inputs=False,
                                gpu_fraction=GPU_MEMORY_FRACTION / max(1, gpu_sharers())
                                if job["device"] == "cuda" else 0.0,
                                reference_s=min(budget.reference_s, float(judge.settings.timeout_s)))
    limits = Limits.for_job(judge.settings, job["device"], small)
    _send_limits(conn, limits)
    screen = {**job, "prescreen": True, "budget": small.to_json(), "precision": judge.dot_precision}
    verdict = _run_once(screen, base_dir, conn, queued, _new_judge(screen, base_dir), limits, small)
    if not prescreen_final(verdict):
        return verdict
    verdict.setdefault("notes", []).append(
        "judged on the tiny input set alone, before the task's full sizes ran (verify.prescreen): the full run "
        "draws the same tiny set first and ends where this one did")
    verdict.setdefault("phases", {})["prescreen"] = 1.0
    return verdict


# left to the full run even where they are the candidate's: values held to a standard the full run sets with
# its other sets (the tiny set's tolerance grows with the original outputs' magnitude; final only where the
# output fails beyond that growth, learnt or largest: `_beyond_growth`), faults that the
# process's memory state can decide (a kernel reading out of bounds, a crash), and the protocol (the
# prescreen's shorter one is the verifier's own)
NOT_FINAL = (R.MISMATCH, R.CUDA_ERROR, R.CRASH_SIGNAL, R.PROTOCOL_ERROR)


def prescreen_final(verdict: dict[str, Any]) -> bool:
    """Whether a prescreen's verdict stands: a failure of the candidate's own that repeats on every run and
    does not depend on what the prescreen leaves out (the task's full sizes, the GPU to itself)."""
    reason = str(verdict.get("reason") or "")
    open_question = R.head(reason) in NOT_FINAL and not (R.head(reason) == R.MISMATCH and _beyond_growth(verdict))
    return reason != R.OK and not verdict.get("correct") and R.side(reason) == "candidate" and R.may_cache(reason) \
        and not open_question and not ran_out_of_memory(verdict) and not _library_resources(verdict)


def _beyond_growth(verdict: dict[str, Any]) -> bool:
    """A tiny-set mismatch beyond any tolerance the full run could hold the tiny set to (the judge's
    `beyond_growth`: at the task's learnt atol growth, or the largest there is): the full run ends there too."""
    return any(isinstance(e, dict) and e.get("name") == "tiny" and e.get("beyond_growth")
               for e in verdict.get("errors") or [])


def _library_resources(verdict: dict[str, Any]) -> bool:
    """A cuBLAS or cuDNN status (an allocation failed, an internal error): the library ran short where the
    prescreen shared its GPU; the full run may not."""
    said = _said(verdict).upper()
    return "CUBLAS_STATUS" in said or "CUDNN_STATUS" in said or "ALLOC_FAILED" in said


def _send_limits(conn: Any, limits: Limits) -> None:
    """The pool's watchdog: the longest the next run may take (its clock restarts here)."""
    if conn is not None:
        try:
            conn.send(M.LimitsMessage(type=M.LIMITS, longest_s=limits.longest_s))
        except (OSError, ValueError):
            pass


def ran_out_of_memory(verdict: dict[str, Any]) -> bool:
    """Whether a run met the end of its GPU memory anywhere (the candidate's call, the verifier's draws,
    the reference, the timing), which a run with more memory might not."""
    reason = str(verdict.get("reason") or "")
    if reason in (R.OUT_OF_MEMORY, R.timing_failed(R.OUT_OF_MEMORY)):
        return True
    return "out of memory" in _said(verdict).lower()


def _said(verdict: dict[str, Any]) -> str:
    """A verdict's error and notes, as one text to look for a cause in."""
    return " ".join([str(verdict.get("error") or ""), *map(str, verdict.get("notes") or [])])


def _remeasured(first: dict[str, Any], job: M.Job, base_dir: str, conn: Any, queued: int | None,
                limits: Limits, budget: Budget, review: float) -> dict[str, Any]:
    """A speedup above the review threshold, measured again in a fresh process before it is paid: the
    lower of the two counts; if the second run is not correct or has no timing, only correctness is."""
    again = _run_once(job, base_dir, conn, queued, _new_judge(job, base_dir), limits, budget)
    out = dict(first)
    notes = list(out.get("notes") or [])

    if again.get("correct") and isinstance(again.get("speedup"), (int, float)):
        paid = min(first["speedup"], again["speedup"])
        notes.append(f"speedup above the review threshold ({review:g}x): measured again in a fresh process, "
                     f"{first['speedup']:.2f}x then {again['speedup']:.2f}x; the lower is paid")
        out["speedup"] = paid
        if paid == again["speedup"]:
            out["timing"], out["ref_time_ms"], out["kernel_time_ms"] = (again.get("timing"), again.get("ref_time_ms"),
                                                                       again.get("kernel_time_ms"))
    else:
        notes.append(f"speedup above the review threshold ({review:g}x) not confirmed: the second run in a "
                     f"fresh process ended {again.get('reason')}; only correctness is paid")
        out.update(speedup=None, timing=None, ref_time_ms=None, kernel_time_ms=None, stage="full")
    out["notes"] = notes
    out["reward"] = compute_reward(out["stage"], out.get("cheat_flags") or [], out.get("speedup"),
                                   float(JobSettings.from_json(job["settings"]).partial_credit))
    return out


def _run_once(job: M.Job, base_dir: str, conn: Any, queued: int | None, judge: Judge, limits: Limits,
              budget: Budget) -> dict[str, Any]:
    """One verification of `job` in its own process (see run_job)."""
    from ..candidate.main import child_main, warm_child  # imports torch: the worker's warm-up imports it first

    workdir = tempfile.mkdtemp(prefix="cand-", dir=base_dir)
    s = judge.settings
    refs = _reference_cache(int(s.reference_cache_mb))
    # a task too big to keep runs its own; a prescreen neither reads nor fills the cache
    use_cache = bool(refs.max_bytes) and budget.cacheable_inputs and not job.get("prescreen")
    key = cache_key(job)
    entry = refs.get(key) if use_cache else None
    child_job, inherit = job, ()
    if entry is not None:
        judge.preload(entry.refs, entry.notes)
        child_job, inherit = {**job, "reference_cache": entry.child_view()}, tuple(entry.fds)
    elif use_cache:
        child_job = {**job, "collect_reference": True}

    def started(pid: int) -> None:
        if conn is not None:
            try:
                conn.send(M.Started(type=M.STARTED, child=pid))
            except (OSError, ValueError):
                pass

    if s.compile_check == "full":
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

    # marked as the child is handed its job, before it can run: after the fork its own marks (@setup)
    # could come first, and a trace's points would not read in order
    judge.mark("launched")
    try:
        outcome = run_sandboxed(lambda ch: child_main(child_job, ch), judge.on_message, limits, workdir,
                                watch_fd=conn.fileno() if conn is not None else None, on_start=started,
                                inherit_fds=inherit, spare=spare, payload=child_job,
                                apart=tuple(x.identity for x in SPARES.spares), on_running=refill)
        verdict = judge.finalize(outcome)
        if entry is None and use_cache:
            record = judge.reference_record()
            stored = refs.put(key, record) if record is not None else None
            if stored is not None and conn is not None:
                share_reference(conn, key, stored)
        return verdict
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
