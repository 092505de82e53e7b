"""Waiting for the GPU lock is not the candidate's time: the sandbox sees, from /proc/locks, when a
candidate's process is blocked on a lock that another process holds, and not when it blocks on a
lock of its own tree (a self-made deadlock must still meet the wall-clock backstop)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

from tritonrl_lib.verify.sandbox.processes import waiting_on_others

BLOCKER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
"""


def _wait_until(pred, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_a_process_blocked_on_anothers_lock_is_waiting_on_others(tmp_path):
    path = tmp_path / "gpu.lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # this process holds it, like a timer holding the GPU alone
    child = subprocess.Popen([sys.executable, "-c", BLOCKER, str(path)])
    try:
        assert _wait_until(lambda: waiting_on_others([child.pid]))
        # the holder counted as part of the same tree: a deadlock of its own, no credit
        assert not waiting_on_others([child.pid, os.getpid()])
        fcntl.flock(fd, fcntl.LOCK_UN)
        child.wait(timeout=10)
        assert not waiting_on_others([child.pid])
    finally:
        child.kill()
        os.close(fd)


def test_nothing_waiting_when_no_lock_is_contended(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        assert not waiting_on_others([sleeper.pid])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_waits_work_on_descriptors_past_select_limit():
    """A worker holding hundreds of cached references has descriptors past 1024 (select's limit)."""
    from tritonrl_lib.verify.sandbox.fdwait import wait_fds

    pipes = [os.pipe() for _ in range(560)]
    try:
        r, w = pipes[-1]
        assert r > 1024
        assert wait_fds([r], timeout_s=0.01) == ([], [])
        os.write(w, b"x")
        assert wait_fds([r], [w], timeout_s=1) == ([r], [w])
        os.close(w)
        pipes[-1] = (r, os.dup(r))
        assert wait_fds([r], timeout_s=0)[0] == [r]  # the other end closed: readable, as select says
    finally:
        for a, b in pipes:
            os.close(a)
            os.close(b)
