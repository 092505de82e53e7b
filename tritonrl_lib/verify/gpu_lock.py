"""Sharing one GPU between candidates: correctness side by side, timing alone.

Several candidates' processes may run their correctness stages on one GPU at once (they are
short and their results do not depend on what else runs), but a timing measurement must have
the GPU to itself. Each candidate's process holds the GPU's lock file shared while it works and
exclusive while it times. A waiting timer first takes a turnstile that new sharers must pass,
so a steady stream of correctness runs cannot starve it. The kernel drops a dead process's
locks, so a killed candidate never leaves the GPU locked.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager


def lock_path(gpu_id: str) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in gpu_id) or "0"
    return os.path.join(tempfile.gettempdir(), f"tritonrl-gpu-{safe}.lock")


class GpuLock:
    def __init__(self, path: str):
        self._rw = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        self._turnstile = os.open(path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o666)

    def share(self) -> None:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)  # wait behind any timer already waiting
        fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        fcntl.flock(self._rw, fcntl.LOCK_SH)

    @contextmanager
    def alone(self):
        """The GPU to this process only; re-shared afterwards."""
        # Drop our shared hold first: two sharers both waiting to upgrade would wait on each other.
        fcntl.flock(self._rw, fcntl.LOCK_UN)
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._rw, fcntl.LOCK_EX)  # waits until the sharers still working are done
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._rw, fcntl.LOCK_SH)
