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
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from . import shared_blobs

REFERENCE_SETTINGS = ("num_variations",)  # the settings stages.reference_phase reads


def cache_key(job: dict[str, Any]) -> str:
    settings = {k: job["settings"].get(k) for k in REFERENCE_SETTINGS}
    raw = json.dumps([job["task_source"], settings, job["device"]], sort_keys=True)
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

    def put(self, key: str, collected: dict[str, Any]) -> Entry | None:
        """Store what a judge collected (Judge.reference_record); None if it does not fit."""
        if not self.max_bytes or key in self.entries:
            return None
        if not shared_blobs.supported():
            return None
        size = sum(len(memoryview(b)) for rec in collected["refs"].values()
                   for b in list(rec["blobs"]) + list(rec["alt"] or []))
        size += sum(len(memoryview(b)) for s in collected["sets"] for b in s["blobs"])
        if size > self.max_bytes:
            return None
        while self.entries and self.nbytes + size > self.max_bytes:
            _k, old = self.entries.popitem(last=False)
            old.close()
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

    def clear(self) -> None:
        for e in self.entries.values():
            e.close()
        self.entries.clear()
