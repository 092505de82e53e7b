"""The processes of a candidate's tree, as /proc shows them, and how to end them all.

The worker is a child subreaper (`prctl`), so a grandchild that double-forks and calls setsid
still hangs below it: `descendants` finds every process of a candidate by parent links,
`tree_memory_bytes` sums their resident memory (Pss once the cheap RSS sum crosses a limit, so
forked children of one worker are not each charged for the whole of torch), and `kill_tree`
SIGKILLs them again and again until /proc shows none left. Linux only; elsewhere the table is empty.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Collection

KILL_GRACE_S = 10.0

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    rss_bytes: int
    start: int = 0  # start time in clock ticks since boot: with the pid, a process's identity
    cpu_ticks: int = 0  # user + system time, its own and that of the children it waited for


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(tree: list[ProcInfo]) -> float:
    """CPU time of a set of processes (what they worked, not how long they waited)."""
    return sum(p.cpu_ticks for p in tree) / _TICKS


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
    return ProcInfo(pid, int(rest[1]), int(rest[2]), int(rest[3]), rest[0], int(rest[21]) * _PAGE, int(rest[19]),
                    sum(int(x) for x in rest[11:15]))


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


def waiting_on_others(pids: Collection[int]) -> bool:
    """Whether a process among `pids` is blocked on a file lock (flock, fcntl) that a process outside
    `pids` holds: the GPU lock's waits, which a candidate's clocks must not count. A process blocked
    on a lock its own tree holds (a deadlock of its making) is not waiting on others."""
    try:
        with open("/proc/locks", "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return False
    holders: dict[str, set[int]] = {}
    waits: list[tuple[int, str]] = []
    for line in lines:
        parts = line.split()
        blocked = len(parts) > 1 and parts[1] == "->"
        fields = parts[2:] if blocked else parts[1:]
        if len(fields) < 5 or not fields[3].isdigit():
            continue
        pid, inode = int(fields[3]), fields[4]
        if blocked:
            waits.append((pid, inode))
        else:
            holders.setdefault(inode, set()).add(pid)
    ours = set(pids)
    return any(pid in ours and holders.get(inode, set()) - ours for pid, inode in waits)


def prctl(option: int, arg: int) -> bool:
    """Linux's prctl(2) for this process; False where it is not available or refused."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
