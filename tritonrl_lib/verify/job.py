"""One job in a worker: a candidate verified in its own process, judged, its reference phase kept.

`run_job` builds the `Judge`, picks the job's process (the oldest spare, else a fresh fork), runs
it under the job's limits (sandbox.py) and returns the verdict as a dict. Around it live the
worker's singletons, one per worker process: its reference cache (reference_cache.py, shared with
the other workers of its GPU through the pool: `share_reference` / `adopt_reference`) and its
builder of Triton's C modules (native_builds.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from typing import Any

from .compile_check import warm_full_pipeline
from .judge import Judge
from .limits import Limits, memory_share_bytes
from .native_builds import NativeBuilder
from .reference_cache import ReferenceCache, cache_key, recv_fds, send_record
from .reference_cache import export as export_reference
from .sandbox import run_sandboxed
from .spares import SPARES, prestart_wanted, spares_wanted

# the worker's singletons: one per worker process (a forked child has copies it never uses)
_BUILDERS: dict[str, NativeBuilder] = {}
_REFERENCES = ReferenceCache(0)


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


def run_job(job: dict[str, Any], base_dir: str, conn: Any = None, queued: int | None = None) -> dict[str, Any]:
    """Verify one candidate in a fresh child of this worker; returns a Verdict as a dict. `queued`:
    how many jobs the pool still holds after this one (None: unknown)."""
    from .child import child_main, warm_child

    workdir = tempfile.mkdtemp(prefix="cand-", dir=base_dir)
    judge = Judge(job, _builder(base_dir) if job["device"] == "cuda" else None)
    s = judge.settings
    refs = _reference_cache(int(s.reference_cache_mb))
    key = cache_key(job)
    entry = refs.get(key) if refs.max_bytes else None
    child_job, inherit = job, ()
    if entry is not None:
        judge.preload(entry.refs, entry.notes)
        child_job, inherit = {**job, "reference_cache": entry.child_view()}, tuple(entry.fds)
    elif refs.max_bytes:
        child_job = {**job, "collect_reference": True}
    limits = Limits.for_job(s, job["device"])

    def started(pid: int) -> None:
        judge.mark("launched")
        if conn is not None:
            try:
                conn.send({"type": "started", "child": pid})
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
