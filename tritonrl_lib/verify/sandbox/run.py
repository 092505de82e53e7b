"""One candidate's process, run under its limits, its messages fed to the judge as they arrive.

`run_sandboxed` forks the child (forking.py) or hands the job to a spare started ahead (spares.py),
then reads its frames (protocol.py) and passes each to `on_message` (the judge), which answers a
gate, a request, or says to stop. Meanwhile it enforces the job's `Limits` (limits.py): three clocks,
one per phase of the child (its set-up until "setup_done", the reference phase until "ref_done", both
the verifier's own work with their own budgets and their own reasons; then the candidate's, which
counts the CPU time its processes use, not the time they wait, with a wall-clock backstop), resident
memory summed over every process of the candidate's tree, the number of those processes and the bytes
sent; and it watches the pool's connection. When one is crossed, the judge has seen enough, or the
child has said its last, the whole tree is killed (processes.kill_tree).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection

from . import messages as M
from . import shared_blobs
from .. import reasons as R
from .fdwait import wait_fds
from .forking import fork_child
from .limits import Limits
from .processes import (cpu_seconds, descendants, dying, kill_tree, proc_table, reap_children, tree_memory_bytes,
                        waiting_on_others)
from .protocol import GO, ChildChannel, FrameReader, ProtocolError, send_reply, with_mapped
from .spares import Spare

POLL_S = 0.05
EXIT_POLL_S = 0.002  # how often, for EXIT_WATCH_S after the child's pipe closed
EXIT_WATCH_S = 0.25
WATCH_EVERY_S = 0.1  # how often /proc is read for RSS and process counts
JUDGED = "judged"  # the kill reason when the judge said stop: no verdict reason of its own


@dataclass
class SandboxOutcome:
    exit_status: int | None  # os.waitpid status of the child, None if it never got reaped
    kill_reason: str | None  # a verdict reason (timeout, memory_limit, fork_flood, protocol_error, pool_gone) or JUDGED
    leftover_processes: int  # processes still alive after the child itself had exited
    log_tail: str
    peak_rss_mb: float
    detail: str = ""
    prestarted: bool = False  # the child was a spare, started before its job


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
        pid, c2w_r, w2c_w, blob_sock = fork_child(child_fn, workdir, log_path, limits, inherit_fds)
    if on_start is not None:
        on_start(pid)
    if on_running is not None and launched is not None:
        apart |= set(on_running())
        on_running = None

    start = time.monotonic()
    clock = _Clocks(limits, start, set_up=launched is not None)
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
            ready, _ = wait_fds(watch, timeout_s=EXIT_POLL_S if soon else POLL_S)
            if watch_fd is not None and watch_fd in ready:
                kill_reason, detail = R.POOL_GONE, "the pool closed its connection"
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
                            blobs = with_mapped(blob_sock, header, blobs, reader)
                            clock.on_message(header.get("type"), me, apart)
                            action = on_message(header, blobs)
                            if isinstance(action, dict):
                                try:
                                    send_reply(w2c_w, action)
                                except OSError:
                                    pass
                            elif action == "go":
                                try:
                                    os.write(w2c_w, GO)
                                except OSError:
                                    pass
                            elif action == "stop":
                                kill_reason = JUDGED
                                break
                            elif action == "final":
                                final = True
                                break
                    except ProtocolError as e:
                        kill_reason, detail = R.PROTOCOL_ERROR, str(e)
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
                over = clock.over(now, tree)
                if over is not None:
                    kill_reason, detail = over
                    break
                rss = (tree_memory_bytes(tree, limits.memory_limit_mb << 20) if limits.memory_limit_mb
                       else sum(p.rss_bytes for p in tree))
                peak_rss = max(peak_rss, rss)
                if len(tree) > limits.max_processes:
                    kill_reason = R.FORK_FLOOD
                    detail = f"{len(tree)} processes alive (limit {limits.max_processes})"
                    break
                if limits.memory_limit_mb and rss > limits.memory_limit_mb << 20:
                    kill_reason = R.MEMORY_LIMIT
                    detail = f"resident memory {rss >> 20} MiB over the limit of {limits.memory_limit_mb} MiB"
                    break
            over = clock.over(now, None)
            if over is not None:
                kill_reason, detail = over
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


class _Clocks:
    """The three phases' budgets: set-up and reference phase (wall clock: the verifier's own work, said
    as such), then the candidate's own work (CPU time of its processes since the reference phase ended,
    against `timeout_s`, plus the reference phase's CPU time: drawing inputs and sending outputs again
    is the verifier's work done on the candidate's clock) with a wall-clock backstop for a process that
    only waits; time blocked on a lock another candidate holds (the GPU's) counts on no wall clock."""

    def __init__(self, limits: Limits, start: float, set_up: bool):
        self.limits = limits
        self.phase = "reference" if set_up else "setup"  # a spare is set up already
        self.phase_start = start
        self.cpu_mark = 0.0  # the tree's CPU time when the current phase began
        self.reference_cpu = 0.0
        self.last_cpu = 0.0
        self.waited = 0.0  # this phase's wall time blocked on a lock another candidate held (the GPU's)
        self.last_poll = start

    def on_message(self, kind: Any, me: int, apart: Collection[tuple[int, int]]) -> None:
        if kind == M.SETUP_DONE and self.phase == "setup":
            self._next("reference", me, apart)
        elif kind == M.REF_DONE and self.phase in ("setup", "reference"):
            cpu = self._next("candidate", me, apart)
            self.reference_cpu = cpu

    def _next(self, phase: str, me: int, apart: Collection[tuple[int, int]]) -> float:
        cpu = cpu_seconds([p for p in descendants(me, proc_table(), apart) if p.state != "Z"])
        spent = cpu - self.cpu_mark
        self.phase, self.phase_start, self.cpu_mark = phase, time.monotonic(), cpu
        self.waited = 0.0
        return spent

    def over(self, now: float, tree: list[Any] | None) -> tuple[str, str] | None:
        lim = self.limits
        if tree is not None:  # a watch tick: was the tree waiting for the GPU lock since the last one?
            if waiting_on_others([p.pid for p in tree]):
                self.waited += now - max(self.last_poll, self.phase_start)
            self.last_poll = now
        wall = now - self.phase_start - self.waited
        if self.phase == "setup" and wall > lim.setup_s:
            return R.SETUP_TIMEOUT, f"the candidate's process was not set up within {lim.setup_s:g} s"
        if self.phase == "reference" and wall > (lim.reference_s or lim.timeout_s):
            return R.REFERENCE_TIMEOUT, (f"the reference phase took longer than its budget of "
                                         f"{lim.reference_s or lim.timeout_s:g} s")
        if self.phase != "candidate":
            return None
        budget = lim.timeout_s + self.reference_cpu
        if tree is not None:
            self.last_cpu = cpu_seconds(tree) - self.cpu_mark
        if self.last_cpu > budget:
            return R.TIMEOUT, (f"the candidate's processes worked {self.last_cpu:.0f} s of CPU time after the "
                               f"reference phase (limit {lim.timeout_s:g} s, plus {self.reference_cpu:.0f} s for "
                               "the verifier's own work on its inputs and outputs)")
        if wall > lim.wall_factor * budget:
            return R.TIMEOUT, (f"no verdict {wall:.0f} s after the reference phase, not counting "
                               f"{self.waited:.0f} s waiting for the GPU (wall-clock backstop: "
                               f"{lim.wall_factor:g} x {budget:.0f} s)")
        return None


def _left_behind(me: int, pid: int, apart: Collection[tuple[int, int]]) -> int:
    """How many processes of a candidate live on beside its own process `pid` (ended or not)."""
    return len([p for p in descendants(me, proc_table(), apart) if p.state != "Z" and p.pid != pid])


def _read_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
