"""A worker's memory of each task's reference phase, so the candidates after the first skip it.

RL verifies `n_samples` completions of every task, and the reference phase (build the inputs of
every input set, run the reference on each, move its outputs to the worker) is the same for all of
them. The first candidate of a task runs it as always and also sends its inputs; once its
reference phase is over (before its own code is imported: the same trusted window the reference
outputs come from), the worker keeps

- the reference outputs, headers and notes exactly as the judge received them,
- each input set's inputs in sealed memfds (shared_blobs.py) that later children inherit and map
  read-only, so they see the very inputs the cached outputs were computed from,
- a digest of every reference model (init inputs and weights).

A later child of the same task builds the models itself (the candidate gets the reference's
weights from its own process, as always) and uses the cache only if every model digest matches;
otherwise it says so and runs its own reference phase. Keyed by the task source, the settings the
reference phase reads and the device; bounded by bytes, least recently used first out.

The pool keeps what every worker recorded (`PoolStore`: the descriptors of the same sealed files,
so no memory is copied) and hands a record to a worker of the same GPU that lacks it with its next
job of that task (`export` there, `ReferenceCache.adopt` here): a task's reference phase runs once
per GPU, not once per worker. Only trusted processes hold a record on the way (worker, pool,
worker), and every file is checked sealed again when it arrives.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..sandbox import messages as M
from ..sandbox import shared_blobs
from ..sandbox.limits import memory_share_bytes

REFERENCE_SETTINGS = ("num_variations",)  # the settings the reference phase reads (reference_phase.py)
MAX_INLINE_EXPORT = 64 << 20  # a record whose outputs are not all in sealed files goes no further than this
FDS_PER_MESSAGE = 200  # descriptors per message (the kernel takes at most 253)


def cache_key(job: M.Job) -> str:
    settings = {k: job["settings"].get(k) for k in REFERENCE_SETTINGS}
    raw = json.dumps([job["task_source"], settings, job["device"], job.get("seeds")], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass
class Entry:
    refs: dict[str, dict[str, Any]]  # the judge's records of the reference outputs, in order
    notes: list[str]  # what the reference phase said
    models: dict[str, Any]  # {"digests": {...}, "tiny_overrides": ...}
    sets: list[dict[str, Any]]  # per input set: name, stage, model_key, out_specs, inputs (fd per tensor)
    fds: list[int] = field(default_factory=list)
    nbytes: int = 0

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def child_view(self) -> dict[str, Any]:
        """What a child needs (JSON): the input sets with the descriptor numbers it inherits."""
        return {"sets": self.sets, **self.models}


class ReferenceCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, Entry] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.entries.values())

    def get(self, key: str) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def _room(self, key: str, size: int) -> bool:
        """Make room for `size` bytes (least recently used out first); False if it cannot fit."""
        if not self.max_bytes or key in self.entries or not shared_blobs.supported() or size > self.max_bytes:
            return False
        while self.entries and self.nbytes + size > self.max_bytes:
            _k, old = self.entries.popitem(last=False)
            old.close()
        return True

    def put(self, key: str, collected: dict[str, Any]) -> Entry | None:
        """Store what a judge collected (Judge.reference_record); None if it does not fit."""
        size = sum(len(memoryview(b)) for rec in collected["refs"].values()
                   for b in list(rec["blobs"]) + list(rec["alt"] or []))
        size += sum(len(memoryview(b)) for s in collected["sets"] for b in s["blobs"])
        if not self._room(key, size):
            return None
        entry = Entry(refs=collected["refs"], notes=collected["notes"], models=collected["models"], sets=[],
                      nbytes=size)
        try:
            for s in collected["sets"]:
                blobs = iter(s["blobs"])
                inputs = []
                for meta in s["inputs"]:
                    if meta["kind"] != "tensor":
                        inputs.append(meta)
                        continue
                    data = memoryview(next(blobs))
                    fd = None
                    if data.nbytes:
                        # the child's own sealed file where it came as one (nobody can change it): no copy
                        shared = shared_blobs.sealed_file(data)
                        fd = os.dup(shared) if shared is not None else shared_blobs.sealed_copy(data)
                        entry.fds.append(fd)
                    inputs.append({**meta, "fd": fd})
                entry.sets.append({"name": s["name"], "stage": s["stage"], "model_key": s["model_key"],
                                   "out_specs": s["out_specs"], "inputs": inputs})
        except OSError:
            entry.close()
            return None
        self.entries[key] = entry
        return entry

    def adopt(self, key: str, desc: dict[str, Any], fds: list[int]) -> Entry | None:
        """Store a record another worker made (`export`), with the descriptors it came with (this
        takes them all: used or closed); None if it does not fit or a file is not sealed as it must be."""
        fds = list(fds)
        taken: set[int] = set()

        def take(i: Any) -> int:
            if type(i) is not int or not 0 <= i < len(fds) or i in taken:
                raise ValueError("a record names a descriptor it did not bring")
            taken.add(i)
            return fds[i]

        def blob(spec: dict[str, Any]) -> Any:
            if "bytes" in spec:
                return bytes(spec["bytes"])
            fd = os.dup(take(spec["fd"]))  # the view's mapping owns the copy
            # not populated: mapping a whole record's pages (~1 GB for a large task) would hold up the
            # job that brought it; a comparison maps what it reads
            return shared_blobs.map_sealed(fd, int(spec["size"]), populate=False)

        entry: Entry | None = None
        try:
            if not self._room(key, int(desc["nbytes"])):
                return None
            refs = {name: {**{k: v for k, v in rec.items() if k not in ("blobs", "alt")},
                           "blobs": [blob(b) for b in rec["blobs"]],
                           "alt": None if rec["alt"] is None else [blob(b) for b in rec["alt"]]}
                    for name, rec in desc["refs"].items()}
            entry = Entry(refs=refs, notes=list(desc["notes"]), models=desc["models"], sets=[],
                          nbytes=int(desc["nbytes"]))
            for s in desc["sets"]:
                inputs = []
                for meta in s["inputs"]:
                    if meta.get("kind") == "tensor" and meta.get("fd") is not None:
                        fd = os.dup(take(meta["fd"]))
                        entry.fds.append(fd)
                        shared_blobs.check_sealed(fd, int(meta["nbytes"]))
                        meta = {**meta, "fd": fd}
                    inputs.append(meta)
                entry.sets.append({**s, "inputs": inputs})
        except (KeyError, TypeError, ValueError, OSError):  # MappedBlobError is a ValueError
            if entry is not None:
                entry.close()
            return None
        finally:
            for fd in fds:
                os.close(fd)
        self.entries[key] = entry
        return entry

    def clear(self) -> None:
        for e in self.entries.values():
            e.close()
        self.entries.clear()


def export(entry: Entry) -> tuple[dict[str, Any], list[int]] | None:
    """An entry as (a picklable description, the descriptors it names by index) for another worker
    (through the pool); the descriptors stay this worker's (sending them passes copies). None where
    too much of it is not in sealed files."""
    fds: list[int] = []
    inline = 0

    def blob(b: Any) -> dict[str, Any]:
        nonlocal inline
        view = memoryview(b)
        shared = shared_blobs.sealed_file(view)
        if shared is None:
            inline += view.nbytes
            return {"bytes": bytes(view)}
        fds.append(shared)
        return {"fd": len(fds) - 1, "size": view.nbytes}

    refs = {name: {**{k: v for k, v in rec.items() if k not in ("blobs", "alt")},
                   "blobs": [blob(b) for b in rec["blobs"]],
                   "alt": None if rec["alt"] is None else [blob(b) for b in rec["alt"]]}
            for name, rec in entry.refs.items()}
    sets = []
    for s in entry.sets:
        inputs = []
        for meta in s["inputs"]:
            if meta.get("kind") == "tensor" and meta.get("fd") is not None:
                fds.append(meta["fd"])
                meta = {**meta, "fd": len(fds) - 1, "nbytes": os.fstat(meta["fd"]).st_size}
            inputs.append(meta)
        sets.append({**s, "inputs": inputs})
    if inline > MAX_INLINE_EXPORT:
        return None
    return {"refs": refs, "notes": list(entry.notes), "models": entry.models, "sets": sets,
            "nbytes": entry.nbytes}, fds


# --------------------------------------------------------------------------- between worker and pool


def send_record(conn: Any, header: M.ReferenceMessage, fds: list[int]) -> None:
    """`header` (it says how many descriptors follow: "nfds") over a multiprocessing Connection on a
    Unix socket, then the descriptors, a few hundred per one-byte message."""
    conn.send({**header, "nfds": len(fds)})
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        for i in range(0, len(fds), FDS_PER_MESSAGE):
            socket.send_fds(sock, [b"r"], fds[i:i + FDS_PER_MESSAGE])
    finally:
        sock.close()


def recv_fds(conn: Any, n: int) -> list[int]:
    """The `n` descriptors that follow a record's header on `conn` (all of them or an OSError)."""
    out: list[int] = []
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        while len(out) < n:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1, min(FDS_PER_MESSAGE, n - len(out)))
            out.extend(fds)
            if msg != b"r" or not fds:
                raise OSError("the descriptors of a reference record did not arrive")
    except BaseException:
        for fd in out:
            os.close(fd)
        raise
    finally:
        sock.close()
    return out


class PoolStore:
    """The pool's copies of its workers' records: per GPU (scope) and cache key, the description and
    descriptors (the workers' sealed files: no memory of its own but what keeps them alive), least
    recently used out first past `max_bytes` or `max_fds`."""

    def __init__(self, max_bytes: int, max_fds: int):
        self.max_bytes, self.max_fds = max_bytes, max_fds
        self.records: OrderedDict[tuple[str, str], tuple[dict[str, Any], list[int]]] = OrderedDict()

    @classmethod
    def for_pool(cls, max_mb: int, pools: int = 1) -> PoolStore | None:
        """A pool's store: at most `max_mb` and its share (of `pools` on the host) of a quarter of the
        machine's memory (the workers' shares together: the store keeps their files, it holds no copy), and
        a quarter of the descriptors this process may open (the soft limit raised where it is low)."""
        if max_mb <= 0 or not shared_blobs.supported():
            return None
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = 1 << 16 if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)
            if soft != resource.RLIM_INFINITY and soft < want:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
            max_fds = (1 << 14) if soft == resource.RLIM_INFINITY else soft // 4
        except (ValueError, OSError):
            max_fds = 256
        share = memory_share_bytes(workers=1, pools=pools)
        return cls(min(max_mb << 20, share if share is not None else 1 << 62), max_fds)

    def _totals(self) -> tuple[int, int]:
        return (sum(d["nbytes"] for d, _ in self.records.values()),
                sum(len(f) for _, f in self.records.values()))

    def put(self, scope: str, key: str, desc: dict[str, Any], fds: list[int]) -> bool:
        """Keep a record (taking its descriptors: kept or closed); False if it was not kept."""
        size = int(desc.get("nbytes") or 0)
        if (scope, key) in self.records or size > self.max_bytes or len(fds) > self.max_fds:
            for fd in fds:
                os.close(fd)
            return False
        while self.records:
            nbytes, nfds = self._totals()
            if nbytes + size <= self.max_bytes and nfds + len(fds) <= self.max_fds:
                break
            _k, (_d, old) = self.records.popitem(last=False)
            for fd in old:
                os.close(fd)
        self.records[(scope, key)] = (desc, list(fds))
        return True

    def get(self, scope: str, key: str) -> tuple[dict[str, Any], list[int]] | None:
        rec = self.records.get((scope, key))
        if rec is not None:
            self.records.move_to_end((scope, key))
        return rec

    def has(self, scope: str, key: str) -> bool:
        return (scope, key) in self.records

    def close(self) -> None:
        for _d, fds in self.records.values():
            for fd in fds:
                os.close(fd)
        self.records.clear()
