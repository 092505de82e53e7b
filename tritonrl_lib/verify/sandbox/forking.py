"""Forking a candidate's process from the worker, and what every such process does first.

A fresh child (`fork_child`) or a spare (spares.py) is a fork of the worker with its channel (two
pipes and a socket for sealed memfds, protocol.py). Before anything of its job it `isolate`s itself
(its own session, SIGKILL when the worker dies, default signals, every inherited descriptor closed
but its channel's) and `enter_job`s: output to its log, the kernel's limits (limits.py), its own temp
dir and Triton cache. A failure of this harness itself is reported as an `internal_error` frame and
the process leaves at once (`leave`: never through Python's teardown, which would run the worker's
atexit handlers in a copy of the worker).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tempfile
import traceback
from typing import Any, Callable

from . import messages as M
from . import shared_blobs
from .limits import Limits, set_rlimits
from .processes import PR_SET_PDEATHSIG, prctl
from .protocol import ChildChannel, encode_frame, write_all

HARNESS_FAILED = 70  # exit code of a child whose harness (not its candidate) failed


def fork_with_channel(run: Callable[[int, int, Any], None]) -> tuple[int, int, int, Any]:
    """A child with its channel, running `run(out_fd, in_fd, blob socket)` (which never returns);
    here: (pid, c2w_r, w2c_w, worker's blob socket)."""
    c2w_r, c2w_w, w2c_r, w2c_w, blob_sock, child_sock = _channel()
    # The worker's objects leave the collector's view for the fork: the child's collections (a full
    # one in forget_reference, ~0.15 s over torch's and Triton's objects) only walk what the child made,
    # and touch none of the pages it shares with the worker. The worker's own collector is as before.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # ---- the child
        run(c2w_w, w2c_r, child_sock)
    gc.unfreeze()
    os.close(c2w_w)
    os.close(w2c_r)
    if child_sock is not None:
        child_sock.close()
    return pid, c2w_r, w2c_w, blob_sock


def _channel() -> tuple[int, int, int, int, Any, Any]:
    """The channel of one child: (c2w_r, c2w_w, w2c_r, w2c_w, worker's blob socket, child's)."""
    c2w_r, c2w_w = os.pipe()
    w2c_r, w2c_w = os.pipe()
    pair = shared_blobs.socket_pair()  # large blobs: sealed memfds (worker end, child end)
    blob_sock, child_sock = pair if pair else (None, None)
    try:
        import fcntl

        fcntl.fcntl(c2w_r, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer wake-ups for large outputs
    except (OSError, ImportError, AttributeError):
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    return c2w_r, c2w_w, w2c_r, w2c_w, blob_sock, child_sock


def fork_child(child_fn: Callable[[ChildChannel], None], workdir: str, log_path: str, limits: Limits,
               inherit_fds: tuple[int, ...]) -> tuple[int, int, int, Any]:
    """A fresh child running `child_fn(channel)` in its job; (pid, c2w_r, w2c_w, blob socket)."""
    return fork_with_channel(lambda out_fd, in_fd, sock: _child_entry(child_fn, out_fd, in_fd, workdir, log_path,
                                                                      limits, sock, inherit_fds))


def isolate(keep: set[int]) -> None:
    """First thing in a forked child: its own session, dies with the worker, default signals, and
    nothing of the worker's (above all its pool connection) reachable but the descriptors `keep`."""
    os.setsid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker died: so does this candidate
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def enter_job(workdir: str, log_path: str, limits: Limits) -> None:
    """The candidate's surroundings: output to its log, its limits, its own temp dir and Triton cache."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.close(null_fd)
    set_rlimits(limits)
    cache = os.path.join(workdir, "triton_cache")
    os.makedirs(cache, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = cache
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    os.chdir(workdir)
    import faulthandler

    faulthandler.enable(all_threads=True)


def _child_entry(child_fn: Callable[[ChildChannel], None], out_fd: int, in_fd: int, workdir: str,
                 log_path: str, limits: Limits, blob_sock: Any = None, inherit_fds: tuple[int, ...] = ()) -> None:
    code = 0
    try:
        isolate({out_fd, in_fd, *inherit_fds} | ({blob_sock.fileno()} if blob_sock is not None else set()))
        enter_job(workdir, log_path, limits)
        child_fn(ChildChannel(out_fd, in_fd, blob_sock))
    except BaseException:  # the harness itself failed: say so, never let the child run on
        code = HARNESS_FAILED
        report_internal_error(out_fd)
    finally:
        leave(code)


def report_internal_error(out_fd: int) -> None:
    try:
        write_all(out_fd, encode_frame({"type": M.INTERNAL_ERROR, "error": traceback.format_exc()[-4000:]}))
    except BaseException:
        pass


def leave(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)
