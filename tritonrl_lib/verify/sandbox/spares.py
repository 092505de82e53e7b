"""Spare children: a worker's next candidates' processes, forked before their jobs are known.

What every child does first (on a GPU, creating its CUDA context: ~0.4 s) then overlaps the
candidate before it. A spare runs no candidate code and holds no job data until `Spare.hand_over`
gives it one; then it enters the job exactly as a fresh child does (forking.py). The worker keeps
its spares in one `SpareSlot` per process (`SPARES`); how many it keeps is the spare policy at the
end of this module (`verify.prestart_child`, `verify.spare_children`).
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from typing import TYPE_CHECKING, Any, Callable

from . import shared_blobs
from .fdwait import wait_fds
from .forking import HARNESS_FAILED, enter_job, fork_with_channel, isolate, leave, report_internal_error
from .limits import Limits
from .processes import PR_SET_DUMPABLE, prctl, proc_table_entry
from .protocol import LEN, ChildChannel, read_exactly

if TYPE_CHECKING:
    from ..settings import JobSettings

SPARE_ACCEPTED = b"A"  # spare -> worker, once it holds its job and before it runs any of it
SPARE_FDS_PER_MESSAGE = 200  # descriptors per datagram (the kernel takes at most 253)
SPARE_WAIT_S = 60.0  # longest wait for a spare to take its job (it may still be warming up)
SPARE_IDLE_S = 10.0  # a worker with no job for this long gives its spare up (its GPU memory with it)


class Spare:
    """A child forked before its job is known, so that what every child does first (on a GPU,
    creating its CUDA context: ~0.4 s) overlaps the candidate before it.

    Until it is handed a job it has run no candidate code and holds no job data: it isolates
    itself as every child does (`forking.isolate`), runs `warm(job_waiting)` (it may stop early once a job
    waits: `job_waiting()` says so), and waits, not dumpable (no process
    of its user can trace it or open its descriptors). `hand_over` sends the job (pickled: it goes
    from the trusted side to the untrusted one) and the descriptors the child inherits, which
    `inherited_fd` finds by the worker's numbers; the spare says it accepted, enters the job
    exactly as a fresh child (`forking.enter_job`) and runs `entry(payload, channel)`. If it died or does
    not accept in time, the worker forks a fresh child instead: a spare is never the reason for a
    verdict.
    """

    def __init__(self, pid: int, start: int, out_r: int, in_w: int, sock: Any):
        self.pid, self.start = pid, start
        self.out_r, self.in_w, self.sock = out_r, in_w, sock

    @property
    def identity(self) -> tuple[int, int]:
        return self.pid, self.start

    @classmethod
    def fork(cls, entry: Callable[[Any, ChildChannel], None], warm: Callable[[Callable[[], bool]], None]) -> Spare:
        pid, c2w_r, w2c_w, blob_sock = fork_with_channel(
            lambda out_fd, in_fd, sock: _spare_entry(entry, warm, out_fd, in_fd, sock))
        info = proc_table_entry(pid)
        return cls(pid, info.start if info else 0, c2w_r, w2c_w, blob_sock)

    def hand_over(self, payload: Any, workdir: str, log_path: str, limits: Limits,
                  inherit_fds: tuple[int, ...], wait_s: float | None = None) -> tuple[int, int, int, Any] | None:
        """Give the spare its job; (pid, c2w_r, w2c_w, blob socket) once it accepted, else None."""
        fds = list(inherit_fds)
        if fds and self.sock is None:
            return None
        raw = pickle.dumps({"payload": payload, "workdir": workdir, "log_path": log_path, "limits": limits,
                            "fds": fds}, protocol=pickle.HIGHEST_PROTOCOL)
        deadline = time.monotonic() + min(SPARE_WAIT_S if wait_s is None else wait_s, limits.timeout_s)
        try:
            os.set_blocking(self.in_w, False)
            view = memoryview(LEN.pack(len(raw)) + raw)
            while view.nbytes:  # the spare reads once warm: wait for it, never past the deadline
                _, ready = wait_fds(write=[self.in_w], timeout_s=max(0.0, deadline - time.monotonic()))
                if not ready:
                    return None
                view = view[os.write(self.in_w, view):]
            os.set_blocking(self.in_w, True)
            for i in range(0, len(fds), SPARE_FDS_PER_MESSAGE):
                shared_blobs.send_fds(self.sock, fds[i:i + SPARE_FDS_PER_MESSAGE])
            ready, _ = wait_fds([self.out_r], timeout_s=max(0.0, deadline - time.monotonic()))
            if not ready or os.read(self.out_r, 1) != SPARE_ACCEPTED:
                return None
        except OSError:
            return None
        launched = self.pid, self.out_r, self.in_w, self.sock
        self.out_r = self.in_w = -1
        self.sock = None
        return launched

    def discard(self) -> None:
        """Kill the spare (if it is still the process it was) and close the worker's ends."""
        info = proc_table_entry(self.pid)
        if info is not None and info.start == self.start and info.ppid == os.getpid():
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (OSError, ChildProcessError):
                pass
        for fd in (self.out_r, self.in_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.out_r = self.in_w = -1
        if self.sock is not None:
            self.sock.close()
            self.sock = None


_INHERITED: dict[int, int] | None = None  # in a spare's job: the worker's descriptor number -> ours


def inherited_fd(worker_fd: int) -> int:
    """This process's number for a descriptor the worker passed as `inherit_fds`: the same number in
    a freshly forked child, wherever it arrived in a spare."""
    if _INHERITED is None:
        return worker_fd
    if worker_fd not in _INHERITED:
        raise KeyError(f"descriptor {worker_fd} was not passed to this process")
    return _INHERITED[worker_fd]


class SpareSlot:
    """A worker's spares (`verify.spare_children`), oldest first: a job takes the oldest (the
    likeliest to be warm already), and the slot is topped up so the next ones warm up meanwhile.
    More than one covers a run of candidates each shorter than a spare's warm-up, at the cost of a
    CUDA context each (on the H200 two did not beat one once contexts were cheap: docs/PERFORMANCE.md)."""

    def __init__(self) -> None:
        self.spares: list[Spare] = []

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.spares]

    def take(self) -> Spare | None:
        return self.spares.pop(0) if self.spares else None

    def refill(self, entry: Callable[[Any, ChildChannel], None], warm: Callable[[Callable[[], bool]], None],
               count: int = 1) -> list[Spare]:
        """Top up to `count` spares (never fewer than are waiting); returns those waiting now."""
        while len(self.spares) < count:
            try:
                self.spares.append(Spare.fork(entry, warm))
            except OSError:
                break
        return list(self.spares)

    def drop(self) -> None:
        for spare in self.spares:
            spare.discard()
        self.spares = []


SPARES = SpareSlot()  # the worker's slot: one per process (forked children never use it)


def _spare_entry(entry: Callable[[Any, ChildChannel], None], warm: Callable[[Callable[[], bool]], None],
                 out_fd: int, in_fd: int,
                 blob_sock: Any) -> None:
    code = 0
    accepted = False
    try:
        isolate({out_fd, in_fd} | ({blob_sock.fileno()} if blob_sock is not None else set()))
        prctl(PR_SET_DUMPABLE, 0)  # while it waits nobody of its user traces it or opens its descriptors
        null_fd = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null_fd, fd)
        os.close(null_fd)
        try:
            warm(lambda: bool(wait_fds([in_fd], timeout_s=0)[0]))  # its argument: is a job waiting?
        except BaseException:
            pass  # the job's own set-up meets the same failure and reports it
        launch = _read_launch(in_fd)
        if launch is None:
            leave(0)  # given up before any job: never used
        fds = _receive_fds(blob_sock, len(launch["fds"])) if launch["fds"] else []
        # they arrive at numbers of their own (the worker's may be taken here: the CUDA driver's
        # device files); the job names them by the worker's numbers
        global _INHERITED
        _INHERITED = dict(zip(launch["fds"], fds))
        prctl(PR_SET_DUMPABLE, 1)  # as a fresh child: the worker reads its memory use
        os.write(out_fd, SPARE_ACCEPTED)
        accepted = True
        enter_job(launch["workdir"], launch["log_path"], launch["limits"])
        entry(launch["payload"], ChildChannel(out_fd, in_fd, blob_sock))
    except BaseException:
        code = HARNESS_FAILED
        if accepted:  # the job is ours: say what failed, as a fresh child would
            report_internal_error(out_fd)
    finally:
        leave(code)


def _read_launch(fd: int) -> dict[str, Any] | None:
    try:
        raw = read_exactly(fd, LEN.unpack(read_exactly(fd, LEN.size))[0])
    except OSError:
        return None  # the worker closed the pipe
    return pickle.loads(raw)


def _receive_fds(sock: Any, n: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        _msg, fds = shared_blobs.recv_fds(sock, SPARE_FDS_PER_MESSAGE, wait=True)
        if not fds:
            raise OSError("the worker sent no descriptors")
        out.extend(fds)
    return out


# --------------------------------------------------------------------------- the spare policy


def prestart_wanted(settings: JobSettings, device: str) -> bool:
    """`verify.prestart_child`: auto = on a GPU only (a CPU child has no context to create)."""
    mode = settings.prestart_child
    return mode == "on" or (mode == "auto" and device == "cuda")


def spares_wanted(settings: JobSettings, queued: int | None) -> int:
    """How many spares to keep started: `verify.spare_children`, but no more than this worker's share
    of the jobs still queued in the pool (`queued`, when the pool says), and one at least (for the
    next call): a spare nobody will use only competes with the candidates' own CUDA contexts, which
    the driver creates one at a time."""
    count = max(1, int(settings.spare_children))
    if queued is None:
        return count
    workers = max(1, int(os.environ.get("TRITONRL_POOL_WORKERS") or 1))
    return min(count, max(1, -(-max(0, int(queued)) // workers)))
