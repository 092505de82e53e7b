"""Stopping a tree of processes for good, without being interrupted half-way: the pipeline's step
kernel (run/pipeline.py) and the multi-GPU RL launcher's ranks (train/rl/launch.py).

    with signals_held():   # Ctrl-C / SIGTERM now wait until the tree is gone, then arrive
        stop_tree(roots)   # every process under `roots` frozen (SIGSTOP), then all killed (SIGKILL)
"""

from __future__ import annotations

import signal
import threading
from typing import Iterable

import psutil

HELD = (signal.SIGINT, signal.SIGTERM)


class signals_held:
    """SIGINT and SIGTERM wait until the block ends, then arrive as they would have (the handlers
    from before the block run, once per signal). Done with Python handlers, not a blocked signal
    mask: a signal sent to the process reaches any thread that does not block it, and Python then
    runs its handler in the main thread anyway, so masking the main thread alone holds nothing
    while other threads (a relay, papermill's) run. Outside the main thread nothing is held
    (Python allows no handler there)."""

    def __enter__(self) -> "signals_held":
        self._old: dict[int, object] = {}
        self._arrived: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for sig in HELD:
                if signal.getsignal(sig) is not None:  # None: a handler set outside Python, not restorable
                    self._old[sig] = signal.signal(sig, self._hold)
        return self

    def _hold(self, signum, frame) -> None:
        self._arrived.append(signum)

    @property
    def arrived(self) -> bool:
        """A held signal arrived during the block (it is delivered when the block ends)."""
        return bool(self._arrived)

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        for sig in dict.fromkeys(self._arrived):
            signal.raise_signal(sig)  # the restored handler runs now (KeyboardInterrupt, ...)


def stop_tree(roots: Iterable[psutil.Process], wait_s: float = 5.0) -> list[psutil.Process]:
    """Kill `roots` and all their descendants: each frozen first (SIGSTOP, parents before children:
    nothing forks or respawns while the tree is collected), then all killed (SIGKILL: nothing prints
    on its way out, as a worker whose pipe broke would, straight to the terminal); waits up to
    `wait_s` for them to exit. -> the processes killed. A process already gone is skipped, and psutil
    refuses to signal a pid that was reused since its `Process` was made."""
    frozen: dict[int, psutil.Process] = {}
    todo = list(roots)
    while todo:
        proc = todo.pop()
        if proc.pid in frozen:
            continue
        try:
            proc.suspend()
            frozen[proc.pid] = proc
            todo += proc.children()
        except psutil.Error:
            continue
    for proc in frozen.values():
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(list(frozen.values()), timeout=wait_s)
    return list(frozen.values())
