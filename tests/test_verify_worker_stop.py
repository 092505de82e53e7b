"""Stopping the pool's workers together (verify/worker_stop.py): every worker gets a step's signal
before any gets the next, the waits after a signal share one deadline (a fake clock: the time they
would take, not how fast this machine is), a worker that leaves on STOP or SIGTERM is sent nothing
harsher, and real processes that ignore SIGTERM end by SIGKILL, their candidates' sessions with them."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import types

import pytest

from tritonrl_lib.verify import worker_stop
from tritonrl_lib.verify.sandbox import messages as M
from tritonrl_lib.verify.worker_stop import KILL_WAIT_S, STOP_WAIT_S, TERM_WAIT_S, stop_workers


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


ORDER = ("stop", "terminate", "kill")


class FakeProc:
    """Records what it is sent into the shared log; leaves on `leaves_on` or anything harsher (ORDER;
    None: never); a wait that times out takes its whole timeout on the clock."""

    def __init__(self, name: str, log: list, clock: Clock, leaves_on: str | None) -> None:
        self.name, self.log, self.clock, self.leaves_on = name, log, clock, leaves_on
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def _signal(self, step: str, code: int) -> None:
        self.log.append((step, self.name))
        if self.returncode is None and self.leaves_on is not None and ORDER.index(self.leaves_on) <= ORDER.index(step):
            self.returncode = code

    def terminate(self) -> None:
        self._signal("terminate", -signal.SIGTERM)

    def kill(self) -> None:
        self._signal("kill", -signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self.log.append(("wait", self.name, timeout))
        if self.returncode is None:
            self.clock.now += timeout
            raise subprocess.TimeoutExpired("fake", timeout)
        return self.returncode


class FakeConn:
    def __init__(self, proc: FakeProc) -> None:
        self.proc = proc
        self.closed = False

    def send(self, msg: dict) -> None:
        self.proc.log.append(("send", self.proc.name, msg["type"]))
        if self.proc.leaves_on == "stop":
            self.proc.returncode = 0

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(worker_stop, "time", types.SimpleNamespace(monotonic=c.monotonic, sleep=c.sleep))
    return c


def fake_workers(log: list, clock: Clock, leaves_on: dict[str, str | None], idle: tuple[str, ...] = ()) -> list:
    out = []
    for name, how in leaves_on.items():
        proc = FakeProc(name, log, clock, how)
        out.append(types.SimpleNamespace(proc=proc, conn=FakeConn(proc), child_pid=None, base_dir=None,
                                         job_index=None if name in idle else 0))
    return out


def positions(log: list, step: str) -> list[int]:
    return [n for n, entry in enumerate(log) if entry[0] == step]


def waits_between(log: list, start: int, end: int) -> list[float]:
    return [e[2] for e in log[start:end] if e[0] == "wait"]


def test_every_worker_gets_sigterm_before_any_gets_sigkill(clock):
    log: list = []
    workers = fake_workers(log, clock, {f"w{i}": "kill" for i in range(4)})
    stop_workers(workers)
    terms, kills = positions(log, "terminate"), positions(log, "kill")
    assert sorted(log[n][1] for n in terms) == sorted(log[n][1] for n in kills) == ["w0", "w1", "w2", "w3"]
    assert max(terms) < min(kills)
    assert all(w.proc.returncode == -signal.SIGKILL and w.conn.closed for w in workers)


def test_the_waits_after_a_signal_share_one_deadline(clock):
    # workers that never leave: each step's waits run out, and together take no more than the step's limit
    log: list = []
    workers = fake_workers(log, clock, {f"w{i}": None for i in range(6)}, idle=tuple(f"w{i}" for i in range(6)))
    stop_workers(workers, graceful=True)
    sends, terms, kills = positions(log, "send"), positions(log, "terminate"), positions(log, "kill")
    assert len(sends) == len(terms) == len(kills) == 6
    after_stop = waits_between(log, max(sends), min(terms))
    after_term = waits_between(log, max(terms), min(kills))
    after_kill = waits_between(log, max(kills), len(log))
    assert len(after_stop) == len(after_term) == len(after_kill) == 6  # every worker waited for, by one deadline
    assert sum(after_stop) == pytest.approx(STOP_WAIT_S)
    assert sum(after_term) == pytest.approx(TERM_WAIT_S)
    assert sum(after_kill) == pytest.approx(KILL_WAIT_S)
    assert clock.now == pytest.approx(STOP_WAIT_S + TERM_WAIT_S + KILL_WAIT_S)  # one worker's worst, not six


def test_a_worker_that_exits_on_sigterm_is_never_sent_sigkill(clock):
    log: list = []
    gentle, stubborn = fake_workers(log, clock, {"gentle": "terminate", "stubborn": "kill"})
    stop_workers([gentle, stubborn])
    assert ("terminate", "gentle") in log and ("kill", "gentle") not in log
    assert ("terminate", "stubborn") in log and ("kill", "stubborn") in log
    assert gentle.proc.returncode == -signal.SIGTERM and stubborn.proc.returncode == -signal.SIGKILL
    assert clock.now == pytest.approx(TERM_WAIT_S)  # the stubborn one's SIGTERM wait; it left on SIGKILL at once


def test_graceful_workers_are_sent_stop_first_and_the_busy_ones_are_not(clock):
    log: list = []
    workers = fake_workers(log, clock, {"idle_a": "stop", "idle_b": "terminate", "busy": "terminate"},
                           idle=("idle_a", "idle_b"))
    already_gone = fake_workers(log, clock, {"gone": None}, idle=("gone",))[0]
    already_gone.proc.returncode = 0
    stop_workers([*workers, already_gone], graceful=lambda w: w.job_index is None)
    sends = [log[n][1:] for n in positions(log, "send")]
    assert sends == [("idle_a", M.STOP), ("idle_b", M.STOP)]  # not the busy one, nor one already gone
    assert max(positions(log, "send")) < min(positions(log, "terminate"))
    assert sorted(log[n][1] for n in positions(log, "terminate")) == ["busy", "idle_b"]  # idle_a left on STOP
    assert positions(log, "kill") == []
    assert all(w.conn.closed for w in [*workers, already_gone])


def test_only_the_verifiers_own_temp_dirs_are_removed(clock, tmp_path):
    log: list = []
    ours, other = tmp_path / "tritonrl-verify-abc", tmp_path / "something-else"
    for d in (ours, other):
        (d / "sub").mkdir(parents=True)
    workers = fake_workers(log, clock, {"a": "terminate", "b": "terminate"})
    workers[0].base_dir, workers[1].base_dir = str(ours), str(other)
    stop_workers(workers)
    assert not ours.exists() and other.exists()


IGNORES_SIGTERM = ("import signal, sys, time\n"
                   "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                   "print('ready', flush=True)\n"
                   "time.sleep(600)\n")


def test_real_workers_that_ignore_sigterm_all_end_by_sigkill_with_their_candidates():
    procs, workers, ends = [], [], []
    try:
        for _ in range(3):
            proc = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True)
            procs.append(proc)
        # a candidate's process: its own session, as the worker starts them
        candidate = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        procs.append(candidate)
        for proc in procs[:3]:
            assert proc.stdout.readline().strip() == "ready"  # SIGTERM is ignored from here on
            mine, theirs = multiprocessing.Pipe()
            ends.append(theirs)
            workers.append(types.SimpleNamespace(proc=proc, conn=mine, child_pid=None, base_dir=None, job_index=0))
        workers[0].child_pid = candidate.pid
        stop_workers(workers)
        assert [w.proc.poll() for w in workers] == [-signal.SIGKILL] * 3
        assert all(w.conn.closed for w in workers)
        assert candidate.wait(timeout=10) == -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        for end in ends:
            end.close()
