"""Sharing one GPU between candidates: correctness side by side, timing alone.

Several candidates' processes may run their correctness stages on one GPU at once (they are
short and their results do not depend on what else runs), but a timing measurement must have
the GPU to itself. A candidate's process holds the GPU's lock file shared only while it may have
work on the GPU (the reference phase, building the model, each call of it) and not while it waits
for the worker's judgement or compiles a kernel (after a device-wide synchronise), so a timer waits
for the GPU work in flight, not for whole candidates. It holds the lock exclusive while it times.
A waiting timer first takes a turnstile that new sharers must pass, so a steady stream of
correctness runs cannot starve it. The kernel drops a dead process's locks, so a killed candidate
never leaves the GPU locked.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator


def lock_path(gpu_id: str) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in gpu_id) or "0"
    return os.path.join(tempfile.gettempdir(), f"tritonrl-gpu-{safe}.lock")


class GpuLock:
    def __init__(self, path: str):
        self._rw = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        self._turnstile = os.open(path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o666)
        self.held: str | None = None  # None | "shared" | "alone"
        self.waited_alone_s = 0.0  # how long the last `alone()` waited for the sharers
        self.waited_s = 0.0  # how long this process has waited for the lock in all
        # with TRITONRL_TRACE set (a diagnostic): every hold as (mode, acquired, released)
        self.holds: list[tuple[str, float, float]] | None = [] if os.environ.get("TRITONRL_TRACE") else None
        self._since = 0.0

    def close(self) -> None:
        for fd in (self._rw, self._turnstile):
            try:
                os.close(fd)
            except OSError:
                pass
        self.held = None

    def _share(self) -> None:
        t0 = time.monotonic()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)  # wait behind any timer already waiting
        fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        fcntl.flock(self._rw, fcntl.LOCK_SH)
        self._since = time.monotonic()
        self.waited_s += self._since - t0
        self.held = "shared"

    def _unlock(self) -> None:
        fcntl.flock(self._rw, fcntl.LOCK_UN)
        if self.holds is not None and self.held is not None and len(self.holds) < 200:
            self.holds.append((self.held, self._since, time.monotonic()))
        self.held = None

    @contextmanager
    def shared(self) -> Iterator[None]:
        """The GPU alongside other sharers (nested: a no-op inside a hold)."""
        if self.held is not None:
            yield
            return
        self._share()
        try:
            yield
        finally:
            self._unlock()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Give a shared hold up for a while (CPU-only work: the caller has synchronised the device)."""
        if self.held != "shared":
            yield
            return
        self._unlock()
        try:
            yield
        finally:
            self._share()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The GPU to this process only; the hold held before (if any) is restored afterwards."""
        before = self.held
        # Drop our shared hold first: two sharers both waiting to upgrade would wait on each other.
        if before is not None:
            self._unlock()
        t0 = time.monotonic()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._rw, fcntl.LOCK_EX)  # waits until the sharers still working are done
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.waited_alone_s = time.monotonic() - t0
        self.waited_s += self.waited_alone_s
        self._since = time.monotonic()
        self.held = "alone"
        try:
            yield
        finally:
            self._unlock()
            if before == "shared":
                self._share()
