"""Worker processes that run untrusted candidates, one fresh forked child per candidate.

A worker is a long-lived process (`python -m tritonrl_lib.verify.sandbox`) started by the pool. It
imports torch and triton once, never initialises CUDA and never runs a torch op itself, so forking
it is cheap and every child starts clean. For each job it forks a child that:

- starts a new session (its own process group), closes every inherited descriptor except its two
  pipes, writes stdout/stderr to a log file in its own temp dir, and gets its own Triton cache;
- runs under resource limits where the OS allows (no core dumps, a file-size cap, an address-space
  cap on the CPU only: CUDA needs huge virtual reservations);
- runs `stages.child_main`, streaming framed messages (JSON header + raw tensor bytes, never pickle:
  the child is untrusted) to the worker, and exits.

The worker is the trusted side: it feeds those messages to a `Judge`, answers stage gates, enforces
the timeout, an RSS limit summed over every descendant, and a process-count limit, and kills the
whole tree (repeatedly, until /proc shows none left) when one is crossed or the judge has seen
enough. The worker is a child subreaper, so a grandchild that double-forks and calls setsid still
stays in its tree.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Collection

from . import shared_blobs

# Frame: 4-byte little-endian header length, JSON header (with "blobs": [byte lengths]), the blobs.
_LEN = struct.Struct("<I")
REPLY_TAG = b"R"  # worker -> child: a JSON reply (tag, 4-byte length, JSON); gate answers are one other byte
MAX_HEADER_BYTES = 4 << 20
MAX_PROCESSES = 16  # a candidate's tree (the child included) may not hold more live processes
POLL_S = 0.05
EXIT_POLL_S = 0.002  # how often, for EXIT_WATCH_S after the child's pipe closed
EXIT_WATCH_S = 0.25
WATCH_EVERY_S = 0.1  # how often /proc is read for RSS and process counts
KILL_GRACE_S = 10.0

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class ProtocolError(RuntimeError):
    """The child sent bytes that are not a well-formed frame (or too many of them)."""


# --------------------------------------------------------------------------- framing


def encode_frame(header: dict[str, Any], blobs: list[memoryview | bytes] = ()) -> list[memoryview | bytes]:
    head = dict(header)
    head["blobs"] = [memoryview(b).nbytes for b in blobs]
    raw = json.dumps(head, separators=(",", ":")).encode()
    return [_LEN.pack(len(raw)) + raw, *blobs]


def write_all(fd: int, parts: list[memoryview | bytes]) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            n = os.write(fd, view)
            view = view[n:]


class FrameReader:
    """Incremental parser of frames arriving on a pipe; validates every size it is told."""

    def __init__(self, max_total_bytes: int):
        self.max_total = max_total_bytes
        self.total = 0
        self._head = bytearray()
        self._header: dict[str, Any] | None = None
        self._sizes: list[int] = []
        self._blobs: list[bytearray] = []
        self._filled = 0  # bytes of the current (last) blob received so far

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], list[bytearray]]]:
        self.total += len(data)
        if self.total > self.max_total:
            raise ProtocolError(f"the candidate's process sent more than {self.max_total >> 20} MiB")
        view = memoryview(data)
        out = []
        while True:
            if self._header is None:
                if not view.nbytes:
                    return out
                view = self._read_header(view)
                if self._header is None:
                    return out
            while True:  # fill the blobs this header announced, one after another
                if self._blobs and self._filled < len(self._blobs[-1]):
                    cur = self._blobs[-1]
                    take = min(len(cur) - self._filled, view.nbytes)
                    if take == 0:
                        return out
                    cur[self._filled:self._filled + take] = view[:take]
                    self._filled += take
                    view = view[take:]
                elif len(self._blobs) < len(self._sizes):
                    self._blobs.append(bytearray(self._sizes[len(self._blobs)]))
                    self._filled = 0
                else:
                    break
            out.append(self._emit())

    def _read_header(self, view: memoryview) -> memoryview:
        if len(self._head) < _LEN.size:
            take = min(_LEN.size - len(self._head), view.nbytes)
            self._head += view[:take]
            view = view[take:]
            if len(self._head) < _LEN.size:
                return view
            (n,) = _LEN.unpack_from(self._head)
            if n > MAX_HEADER_BYTES:
                raise ProtocolError(f"frame header of {n} bytes")
        need = _LEN.size + _LEN.unpack_from(self._head)[0] - len(self._head)
        take = min(need, view.nbytes)
        self._head += view[:take]
        view = view[take:]
        if take < need:
            return view
        try:
            header = json.loads(bytes(self._head[_LEN.size:]))
        except ValueError as e:
            raise ProtocolError(f"frame header is not JSON: {e}") from None
        sizes = header.get("blobs") if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(type(s) is int and 0 <= s for s in sizes):
            raise ProtocolError("frame header without valid blob sizes")
        if self.total - view.nbytes + sum(sizes) > self.max_total:
            raise ProtocolError(f"the candidate's process sent more than {self.max_total >> 20} MiB")
        self._header, self._sizes, self._blobs, self._filled = header, sizes, [], 0
        return view

    def _emit(self) -> tuple[dict[str, Any], list[bytearray]]:
        out = (self._header, self._blobs)
        self._head = bytearray()
        self._header, self._sizes, self._blobs, self._filled = None, [], [], 0
        return out  # type: ignore[return-value]

    @property
    def mid_frame(self) -> bool:
        return bool(self._head) or self._header is not None


class ChildChannel:
    """The child's end: framed messages to the worker, one-byte gate answers back. Blobs of 1 MiB
    and more travel as sealed memory files over `blob_sock` where there is one (shared_blobs.py)."""

    def __init__(self, out_fd: int, in_fd: int, blob_sock: Any = None):
        self.out_fd, self.in_fd = out_fd, in_fd
        self.blob_sock = blob_sock

    def send(self, header: dict[str, Any], blobs: list[memoryview | bytes] = ()) -> None:
        inline, mapped = shared_blobs.send_blobs(self.blob_sock, list(blobs))
        if mapped:
            header = {**header, "mapped": mapped}
        write_all(self.out_fd, encode_frame(header, inline))

    def gate(self, stage: str) -> bool:
        """Ask the worker whether to go on after `stage`; False (or a closed pipe) means stop."""
        self.ask(stage)
        return self.answer()

    def ask(self, stage: str) -> None:
        """The gate's question alone: the worker judges what came before it while this process
        goes on with work that sends nothing (it ends this process at once if that judgement fails)."""
        self.send({"type": "gate", "stage": stage})

    def answer(self) -> bool:
        """The worker's answer to the last `ask`: True to go on."""
        try:
            answer = os.read(self.in_fd, 1)
        except OSError:
            return False
        return answer == b"G"

    def request(self, header: dict[str, Any]) -> dict[str, Any] | None:
        """Send `header` and wait for the worker's JSON reply; None if there is none."""
        self.send(header)
        try:
            if self._read_exactly(1) != REPLY_TAG:
                return None
            (n,) = _LEN.unpack(self._read_exactly(_LEN.size))
            reply = json.loads(self._read_exactly(n))
        except (OSError, ValueError, struct.error):
            return None
        return reply if isinstance(reply, dict) else None

    def _read_exactly(self, n: int) -> bytes:
        return read_exactly(self.in_fd, n)


def read_exactly(fd: int, n: int) -> bytes:
    """`n` bytes from `fd`; OSError if it closes first."""
    out = bytearray()
    while len(out) < n:
        part = os.read(fd, n - len(out))
        if not part:
            raise OSError("the worker closed the channel")
        out += part
    return bytes(out)


# --------------------------------------------------------------------------- /proc


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    rss_bytes: int
    start: int = 0  # start time in clock ticks since boot: with the pid, a process's identity


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def proc_table() -> dict[int, ProcInfo]:
    """Every process /proc shows (Linux); empty elsewhere."""
    out: dict[int, ProcInfo] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            info = proc_table_entry(int(name))
            if info is not None:
                out[info.pid] = info
    return out


def proc_table_entry(pid: int) -> ProcInfo | None:
    """One process as /proc shows it; None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    rest = raw[raw.rfind(")") + 2:].split()
    if len(rest) < 22:
        return None
    return ProcInfo(pid, int(rest[1]), int(rest[2]), int(rest[3]), rest[0], int(rest[21]) * _PAGE, int(rest[19]))


def proportional_bytes(pid: int) -> int | None:
    """Pss of a process: shared (copy-on-write) pages split among their sharers, so forked
    children of one worker are not each charged for the whole of torch."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def tree_memory_bytes(tree: list[ProcInfo], limit: int) -> int:
    """Resident memory of a process tree: the cheap RSS sum, refined to Pss once it crosses `limit`."""
    rss = sum(p.rss_bytes for p in tree)
    if rss <= limit:
        return rss
    total = 0
    for p in tree:
        pss = proportional_bytes(p.pid)
        total += p.rss_bytes if pss is None else pss
    return total


def descendants(root: int, table: dict[int, ProcInfo], apart: Collection[tuple[int, int]] = ()) -> list[ProcInfo]:
    """Every process below `root`, except those in `apart` ((pid, start time) identities: a worker's
    spare child, which belongs to no candidate) and theirs."""
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        p = table[todo.pop()]
        if (p.pid, p.start) in apart:
            continue
        out.append(p)
        todo.extend(children.get(p.pid, []))
    return out


def kill_tree(root: int, sids: tuple[int, ...] = (), grace_s: float = KILL_GRACE_S, reap: bool = True,
              apart: Collection[tuple[int, int]] = (), wait: bool = True) -> int:
    """SIGKILL every descendant of `root` but those `apart` (and every process in sessions `sids`),
    again and again until none is left alive; returns how many distinct processes were killed.
    `reap` collects exited children of this process (only for the worker: the pool must not reap
    the caller's). Without `wait` it returns once a sweep finds no process it has not signalled
    yet: one with SIGKILL pending never runs its own code again and cannot fork, so nothing of
    the tree can act, but its exit (freeing its memory, a CUDA context's teardown: ~0.1 s) goes on
    without us; those processes are remembered as dying (`dying()`) until they are gone."""
    killed: dict[int, ProcInfo] = {}
    deadline = time.monotonic() + grace_s
    me = os.getpid()
    while True:
        table = proc_table()
        targets = [p for p in descendants(root, table, apart) if p.state != "Z"]
        targets += [p for p in table.values() if p.sid in sids and p.pid != me and p.state != "Z"
                    and p.pid not in {t.pid for t in targets}]
        fresh = [p for p in targets if killed.get(p.pid) is None or killed[p.pid].start != p.start]
        for sid in sids:
            try:
                os.killpg(sid, signal.SIGKILL)
            except OSError:
                pass
        for p in targets:
            try:
                os.kill(p.pid, signal.SIGKILL)
                killed[p.pid] = p
            except OSError:
                pass
        if reap:
            reap_children()
        if not wait and not fresh:
            _DYING.update((p.pid, p.start) for p in targets)
            return len(killed)
        if not targets or time.monotonic() > deadline:
            return len(killed)
        if wait:
            time.sleep(0.005)


_DYING: set[tuple[int, int]] = set()  # (pid, start) of processes killed without waiting, maybe still exiting


def dying(table: dict[int, ProcInfo] | None = None) -> set[tuple[int, int]]:
    """The processes a `kill_tree(wait=False)` left exiting that have not finished yet: no
    candidate's process count, memory or kill sweep includes them."""
    table = proc_table() if table is None else table
    _DYING.intersection_update({(p.pid, p.start) for p in table.values() if p.state != "Z"})
    return set(_DYING)


def reap_children() -> list[tuple[int, int]]:
    """Collect every exited child (a subreaper also inherits orphans); returns (pid, status)."""
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def _prctl(option: int, arg: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _read_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --------------------------------------------------------------------------- one candidate


@dataclass
class Limits:
    timeout_s: float
    memory_limit_mb: int  # RSS summed over the candidate's tree; 0 = none
    cap_address_space: bool  # RLIMIT_AS (CPU only)
    max_processes: int = MAX_PROCESSES
    max_transfer_bytes: int = 64 << 30


@dataclass
class SandboxOutcome:
    exit_status: int | None  # os.waitpid status of the child, None if it never got reaped
    kill_reason: str | None  # timeout | memory_limit | fork_flood | protocol_error | judged | pool_gone
    leftover_processes: int  # processes still alive after the child itself had exited
    log_tail: str
    peak_rss_mb: float
    detail: str = ""
    prestarted: bool = False  # the child was a spare, started before its job


# --------------------------------------------------------------------------- a child started ahead of its job

SPARE_ACCEPTED = b"A"  # spare -> worker, once it holds its job and before it runs any of it
SPARE_FDS_PER_MESSAGE = 200  # descriptors per datagram (the kernel takes at most 253)
SPARE_WAIT_S = 60.0  # longest wait for a spare to take its job (it may still be warming up)
SPARE_IDLE_S = 10.0  # a worker with no job for this long gives its spare up (its GPU memory with it)
_PR_SET_DUMPABLE = 4


class Spare:
    """A child forked before its job is known, so that what every child does first (on a GPU,
    creating its CUDA context: ~0.4 s) overlaps the candidate before it.

    Until it is handed a job it has run no candidate code and holds no job data: it isolates
    itself as every child does (`_isolate`), runs `warm(job_waiting)` (it may stop early once a job
    waits: `job_waiting()` says so), and waits, not dumpable (no process
    of its user can trace it or open its descriptors). `hand_over` sends the job (pickled: it goes
    from the trusted side to the untrusted one) and the descriptors the child inherits, which
    `inherited_fd` finds by the worker's numbers; the spare says it accepted, enters the job
    exactly as a fresh child (`_enter_job`) and runs `entry(payload, channel)`. If it died or does
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
        pid, c2w_r, w2c_w, blob_sock = _fork(lambda out_fd, in_fd, sock: _spare_entry(entry, warm, out_fd, in_fd, sock))
        info = proc_table_entry(pid)
        return cls(pid, info.start if info else 0, c2w_r, w2c_w, blob_sock)

    def hand_over(self, payload: Any, workdir: str, log_path: str, limits: Limits,
                  inherit_fds: tuple[int, ...], wait_s: float | None = None) -> tuple[int, int, int, Any] | None:
        """Give the spare its job; (pid, c2w_r, w2c_w, blob socket) once it accepted, else None."""
        import pickle

        fds = list(inherit_fds)
        if fds and self.sock is None:
            return None
        raw = pickle.dumps({"payload": payload, "workdir": workdir, "log_path": log_path, "limits": limits,
                            "fds": fds}, protocol=pickle.HIGHEST_PROTOCOL)
        deadline = time.monotonic() + min(SPARE_WAIT_S if wait_s is None else wait_s, limits.timeout_s)
        try:
            os.set_blocking(self.in_w, False)
            view = memoryview(_LEN.pack(len(raw)) + raw)
            while view.nbytes:  # the spare reads once warm: wait for it, never past the deadline
                _, ready, _ = select.select([], [self.in_w], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    return None
                view = view[os.write(self.in_w, view):]
            os.set_blocking(self.in_w, True)
            for i in range(0, len(fds), SPARE_FDS_PER_MESSAGE):
                shared_blobs.send_fds(self.sock, fds[i:i + SPARE_FDS_PER_MESSAGE])
            ready, _, _ = select.select([self.out_r], [], [], max(0.0, deadline - time.monotonic()))
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


SPARES = SpareSlot()


def _spare_entry(entry: Callable[[Any, ChildChannel], None], warm: Callable[[Callable[[], bool]], None],
                 out_fd: int, in_fd: int,
                 blob_sock: Any) -> None:
    code = 0
    accepted = False
    try:
        _isolate({out_fd, in_fd} | ({blob_sock.fileno()} if blob_sock is not None else set()))
        _prctl(_PR_SET_DUMPABLE, 0)  # while it waits nobody of its user traces it or opens its descriptors
        null_fd = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null_fd, fd)
        os.close(null_fd)
        try:
            warm(lambda: bool(select.select([in_fd], [], [], 0)[0]))  # its argument: is a job waiting?
        except BaseException:
            pass  # the job's own set-up meets the same failure and reports it
        launch = _read_launch(in_fd)
        if launch is None:
            _leave(0)  # given up before any job: never used
        fds = _receive_fds(blob_sock, len(launch["fds"])) if launch["fds"] else []
        # they arrive at numbers of their own (the worker's may be taken here: the CUDA driver's
        # device files); the job names them by the worker's numbers
        global _INHERITED
        _INHERITED = dict(zip(launch["fds"], fds))
        _prctl(_PR_SET_DUMPABLE, 1)  # as a fresh child: the worker reads its memory use
        os.write(out_fd, SPARE_ACCEPTED)
        accepted = True
        _enter_job(launch["workdir"], launch["log_path"], launch["limits"])
        entry(launch["payload"], ChildChannel(out_fd, in_fd, blob_sock))
    except BaseException:
        code = 70
        if accepted:  # the job is ours: say what failed, as a fresh child would
            _report_internal_error(out_fd)
    finally:
        _leave(code)


def _read_launch(fd: int) -> dict[str, Any] | None:
    import pickle

    try:
        raw = read_exactly(fd, _LEN.unpack(read_exactly(fd, _LEN.size))[0])
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


def run_sandboxed(
    child_fn: Callable[[ChildChannel], None],
    on_message: Callable[[dict[str, Any], list[bytearray]], str | dict[str, Any] | None],
    limits: Limits,
    workdir: str,
    watch_fd: int | None = None,
    on_start: Callable[[int], None] | None = None,
    inherit_fds: tuple[int, ...] = (),
    spare: Spare | None = None,
    payload: Any = None,
    apart: Collection[tuple[int, int]] = (),
    on_running: Callable[[], Collection[tuple[int, int]]] | None = None,
) -> SandboxOutcome:
    """Fork a child running `child_fn(channel)` inside `workdir`; feed its messages to `on_message`
    (which may answer "go"/"stop" to a gate, "stop" to end the child now, "final" when the child
    has said all it will (it is ended at once: its own exit is not waited for), or a dict: the
    JSON reply to a request); enforce `limits`.

    `watch_fd` (the pool connection) is watched too: if it closes, the child is killed at once.
    `inherit_fds` stay open in the child (the sealed inputs of a cached reference phase). With a
    `spare` (a child started ahead, see `Spare`) that takes the job, the spare runs the entry it was
    forked with on `payload` instead of a new fork running `child_fn`: the caller gives the same
    function both ways, and the isolation is the same.
    Processes `apart` (the worker's next spares) are neither counted nor killed as the candidate's,
    nor are earlier candidates' processes still exiting (`dying`), nor those `on_running` returns:
    it is called once the child is set up (a spare that took the job, or a fresh child's first
    message: on a GPU its CUDA context exists then), to start the next spares without competing
    with this child's own start (the driver creates contexts one at a time).
    """
    apart = set(apart) | dying()
    log_path = os.path.join(workdir, "output.log")
    launched = spare.hand_over(payload, workdir, log_path, limits, inherit_fds) if spare is not None else None
    if launched is not None:
        pid, c2w_r, w2c_w, blob_sock = launched
    else:
        if spare is not None:
            spare.discard()
        pid, c2w_r, w2c_w, blob_sock = _fork_child(child_fn, workdir, log_path, limits, inherit_fds)
    if on_start is not None:
        on_start(pid)
    if on_running is not None and launched is not None:
        apart |= set(on_running())
        on_running = None

    start = time.monotonic()
    reader = FrameReader(limits.max_transfer_bytes)
    kill_reason: str | None = None
    detail = ""
    exit_status: int | None = None
    exited_at: float | None = None
    eof = False
    final = False  # the child sent its last message: end it now
    eof_at: float | None = None
    last_watch = 0.0
    peak_rss = 0
    leftover = 0
    me = os.getpid()
    try:
        while True:
            watch = [c2w_r] if not eof else []
            if watch_fd is not None:
                watch.append(watch_fd)
            # right after the pipe hit EOF the child is exiting: look for its exit status again soon
            soon = eof_at is not None and exit_status is None and time.monotonic() - eof_at < EXIT_WATCH_S
            ready, _, _ = select.select(watch, [], [], EXIT_POLL_S if soon else POLL_S)
            if watch_fd is not None and watch_fd in ready:
                kill_reason, detail = "pool_gone", "the pool closed its connection"
                break
            if c2w_r in ready:
                data = os.read(c2w_r, 1 << 20)
                if not data:
                    eof, eof_at = True, time.monotonic()
                else:
                    if on_running is not None:
                        apart |= set(on_running())
                        on_running = None
                    try:
                        for header, blobs in reader.feed(data):
                            blobs = _with_mapped(blob_sock, header, blobs, reader)
                            action = on_message(header, blobs)
                            if isinstance(action, dict):
                                raw = json.dumps(action).encode()
                                try:
                                    write_all(w2c_w, [REPLY_TAG + _LEN.pack(len(raw)) + raw])
                                except OSError:
                                    pass
                            elif action == "go":
                                try:
                                    os.write(w2c_w, b"G")
                                except OSError:
                                    pass
                            elif action == "stop":
                                kill_reason = "judged"
                                break
                            elif action == "final":
                                final = True
                                break
                    except ProtocolError as e:
                        kill_reason, detail = "protocol_error", str(e)
                    if kill_reason:
                        break
                    if final:
                        leftover = _left_behind(me, pid, apart)
                        break
            if exit_status is None:
                try:
                    wpid, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    wpid, status = pid, 0
                if wpid == pid:
                    exit_status, exited_at = status, time.monotonic()
            now = time.monotonic()
            if exit_status is not None and (eof or now - exited_at > 1.0):
                # the child is gone; whatever still holds the pipe open is a process it left behind
                leftover = _left_behind(me, pid, apart)
                break
            if now - last_watch >= WATCH_EVERY_S:
                last_watch = now
                tree = [p for p in descendants(me, proc_table(), apart) if p.state != "Z"]
                rss = (tree_memory_bytes(tree, limits.memory_limit_mb << 20) if limits.memory_limit_mb
                       else sum(p.rss_bytes for p in tree))
                peak_rss = max(peak_rss, rss)
                if len(tree) > limits.max_processes:
                    kill_reason = "fork_flood"
                    detail = f"{len(tree)} processes alive (limit {limits.max_processes})"
                    break
                if limits.memory_limit_mb and rss > limits.memory_limit_mb << 20:
                    kill_reason = "memory_limit"
                    detail = f"resident memory {rss >> 20} MiB over the limit of {limits.memory_limit_mb} MiB"
                    break
            if now - start > limits.timeout_s:
                kill_reason, detail = "timeout", f"no verdict within {limits.timeout_s:g} s"
                break
    finally:
        # every process of the candidate is killed; their exit finishes without us (kill_tree)
        kill_tree(me, sids=(pid,), apart=apart, wait=False)
        if exit_status is None:
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
                if wpid == pid:
                    exit_status = status
            except ChildProcessError:
                pass
        reap_children()
        os.close(c2w_r)
        os.close(w2c_w)
        if blob_sock is not None:
            shared_blobs.drain(blob_sock)
            blob_sock.close()
    if reader.mid_frame and kill_reason is None:
        detail = detail or "the child stopped in the middle of a message"
    return SandboxOutcome(exit_status, kill_reason, leftover, _read_tail(log_path), peak_rss / 2**20, detail,
                          prestarted=launched is not None)


def _left_behind(me: int, pid: int, apart: Collection[tuple[int, int]]) -> int:
    """How many processes of a candidate live on beside its own process `pid` (ended or not)."""
    return len([p for p in descendants(me, proc_table(), apart) if p.state != "Z" and p.pid != pid])


def _with_mapped(sock: Any, header: dict[str, Any], inline: list[Any], reader: FrameReader) -> list[Any]:
    """The frame's blobs with its memfd-passed ones in place, counted against the transfer limit."""
    if not header.get("mapped"):
        return inline
    try:
        blobs = shared_blobs.receive_blobs(sock, header, inline, reader.max_total - reader.total)
    except shared_blobs.MappedBlobError as e:
        raise ProtocolError(str(e)) from None
    reader.total += sum(m[1] for m in header["mapped"])
    return blobs


def _fork(run: Callable[[int, int, Any], None]) -> tuple[int, int, int, Any]:
    """A child with its channel, running `run(out_fd, in_fd, blob socket)` (which never returns);
    here: (pid, c2w_r, w2c_w, worker's blob socket)."""
    c2w_r, c2w_w, w2c_r, w2c_w, blob_sock, child_sock = _pipes()
    pid = os.fork()
    if pid == 0:  # ---- the child
        run(c2w_w, w2c_r, child_sock)
    os.close(c2w_w)
    os.close(w2c_r)
    if child_sock is not None:
        child_sock.close()
    return pid, c2w_r, w2c_w, blob_sock


def _pipes() -> tuple[int, int, int, int, Any, Any]:
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


def _fork_child(child_fn: Callable[[ChildChannel], None], workdir: str, log_path: str, limits: Limits,
                inherit_fds: tuple[int, ...]) -> tuple[int, int, int, Any]:
    return _fork(lambda out_fd, in_fd, sock: _child_entry(child_fn, out_fd, in_fd, workdir, log_path, limits, sock,
                                                          inherit_fds))


def _isolate(keep: set[int]) -> None:
    """First thing in a forked child: its own session, dies with the worker, default signals, and
    nothing of the worker's (above all its pool connection) reachable but the descriptors `keep`."""
    os.setsid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker died: so does this candidate
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


def _enter_job(workdir: str, log_path: str, limits: Limits) -> None:
    """The candidate's surroundings: output to its log, its limits, its own temp dir and Triton cache."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.close(null_fd)
    _set_limits(limits)
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
        _isolate({out_fd, in_fd, *inherit_fds} | ({blob_sock.fileno()} if blob_sock is not None else set()))
        _enter_job(workdir, log_path, limits)
        child_fn(ChildChannel(out_fd, in_fd, blob_sock))
    except BaseException:  # the harness itself failed: say so, never let the child run on
        code = 70
        _report_internal_error(out_fd)
    finally:
        _leave(code)


def _report_internal_error(out_fd: int) -> None:
    try:
        write_all(out_fd, encode_frame({"type": "internal_error", "error": traceback.format_exc()[-4000:]}))
    except BaseException:
        pass


def _leave(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)


def _set_limits(limits: Limits) -> None:
    try:
        import resource
    except ImportError:
        return

    def cap(which: int, value: int) -> None:
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_FSIZE, 1 << 30)
    if limits.cap_address_space and limits.memory_limit_mb:
        cap(resource.RLIMIT_AS, _vm_size_bytes() + (limits.memory_limit_mb << 20))


# --------------------------------------------------------------------------- the worker process


def _worker_imports(device: str) -> None:
    """Everything a child needs, imported once in the worker so each fork starts warm."""
    import numpy  # noqa: F401
    import torch  # noqa: F401

    if device == "cpu":
        # first a copy of Triton with the interpreter off, set aside for the compile check
        # (compile_check.py); then the interpreted one the candidates run under
        from .compile_check import stash_compiler_triton

        stash_compiler_triton()
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    if device == "cpu":
        import triton.runtime.interpreter  # noqa: F401

        # imported lazily by the interpreter's argument specialisation: pay for it once here, not
        # in every child (CPU only: on a GPU nothing that might touch the driver loads here)
        try:
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass
    from . import judge, policy, stages, timing  # noqa: F401

    if device == "cuda":
        from .compile_check import warm_gpu_compiler

        warm_gpu_compiler()  # a failure leaves the children cold: slower, not wrong


def worker_main(fd: int, device: str) -> None:
    from multiprocessing.connection import Connection

    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    conn = Connection(fd)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # the pool's process died: so do we, cleaning up (below)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        _worker_imports(device)
        import torch

        if torch.cuda.is_initialized():
            raise RuntimeError("CUDA was initialised in the verifier worker while importing; forked "
                               "candidates could not use the GPU")
    except BaseException:
        conn.send({"type": "failed", "error": traceback.format_exc()[-4000:]})
        return
    base = tempfile.mkdtemp(prefix="tritonrl-verify-")

    def terminate(signum: int, frame: Any) -> None:  # the pool is gone or wants us gone: leave nothing
        kill_tree(os.getpid(), grace_s=5.0)
        shutil.rmtree(base, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    conn.send({"type": "ready", "pid": os.getpid(), "base": base})
    from .judge import adopt_reference, reference_keys, run_job
    from .sandbox import SPARES  # the package's copy, which run_job fills (this file runs as __main__)

    idle_s = float(os.environ.get("TRITONRL_SPARE_IDLE_S") or SPARE_IDLE_S)
    try:
        while True:
            try:
                if SPARES.spares and not conn.poll(idle_s):
                    SPARES.drop()  # no job for a while: give the spares and their GPU memory up
                    continue
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if not isinstance(msg, dict) or msg.get("type") == "stop":
                break
            if msg.get("type") == "reference":  # another worker's reference phase, for the job that follows
                try:
                    adopt_reference(conn, msg)
                except (OSError, ValueError):
                    break  # the pool's end is broken: it notices and replaces this worker
                continue
            if msg.get("type") != "job":
                continue
            job = msg["job"]
            try:
                verdict = run_job(job, base, conn, queued=msg.get("queued"))
            except BaseException:
                verdict = {"task_id": job.get("task_id", ""), "stage": "static", "reason": "internal_error",
                           "error": traceback.format_exc()[-4000:]}
            try:
                conn.send({"type": "result", "id": msg["id"], "verdict": verdict,
                           "spares": SPARES.pids, "ref_keys": reference_keys()})
            except (OSError, ValueError):
                break
    finally:
        kill_tree(os.getpid())
        shutil.rmtree(base, ignore_errors=True)


def _main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="tritonrl verifier worker (started by VerifierPool)")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=("cpu", "cuda"), required=True)
    args = ap.parse_args(argv)
    worker_main(args.fd, args.device)
    # leave without tearing down modules: the compiler's set-aside copy of Triton (compile_check.py)
    # would make the extension report its objects as leaked
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1:])
