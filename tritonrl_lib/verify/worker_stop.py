"""Stopping the pool's workers together: each step's signal goes to every worker first, then one
deadline per step is shared by all. A GPU worker's CUDA teardown takes seconds, and waiting for
each worker in turn made an interrupted RL run with 12 busy workers take ~275 s to stop.

Steps, each only for the workers still alive: STOP to the `graceful` ones (they clean up after
themselves), SIGTERM, SIGKILL; then whatever their candidates left (their own sessions) is killed,
their temp dirs removed and their connections closed. A worker is anything with the pool's
`_Worker` fields `proc` (a Popen), `conn`, `child_pid` and `base_dir`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Callable, Iterable

from .sandbox import messages as M
from .sandbox.processes import dying, kill_tree

STOP_WAIT_S = 5.0  # a STOPped worker's own exit
TERM_WAIT_S = 3.0  # SIGTERM lets it clean up
KILL_WAIT_S = 10.0
TREE_WAIT_S = 5.0  # the candidates' processes, SIGKILLed, to be gone


def stop_workers(workers: Iterable[Any], graceful: bool | Callable[[Any], bool] = False) -> None:
    """Stop `workers` and what their candidates left; `graceful` (for all, or per worker) asks
    first with STOP."""
    workers = list(workers)
    polite = [w for w in workers if (graceful(w) if callable(graceful) else graceful) and w.proc.poll() is None]
    asked = []
    for w in polite:
        try:
            w.conn.send({"type": M.STOP})
            asked.append(w)
        except (OSError, ValueError):
            pass
    _wait_all(asked, STOP_WAIT_S)
    for step, wait_s in (("terminate", TERM_WAIT_S), ("kill", KILL_WAIT_S)):
        alive = [w for w in workers if w.proc.poll() is None]
        for w in alive:
            getattr(w.proc, step)()
        _wait_all(alive, wait_s)
    before = dying()
    for pid in {w.child_pid for w in workers if w.child_pid}:
        kill_tree(pid, sids=(pid,), grace_s=TREE_WAIT_S, reap=False, wait=False)
    ours = dying() - before
    deadline = time.monotonic() + TREE_WAIT_S
    while ours and time.monotonic() < deadline:
        time.sleep(0.01)
        ours &= dying()
    for w in workers:
        if w.base_dir and os.path.basename(w.base_dir).startswith("tritonrl-verify-"):
            shutil.rmtree(w.base_dir, ignore_errors=True)
        try:
            w.conn.close()
        except OSError:
            pass


def _wait_all(workers: list, limit_s: float) -> None:
    """Wait for every worker's process to exit, all of them by one deadline `limit_s` from now."""
    deadline = time.monotonic() + limit_s
    for w in workers:
        try:
            w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
