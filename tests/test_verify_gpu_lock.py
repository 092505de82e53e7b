"""GPU sharing between candidate processes: correctness side by side, each timing alone, no deadlock."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from tritonrl_lib.verify.sandbox.gpu_lock import GpuLock

pytestmark = pytest.mark.timeout(60)


def _sharer(path, hold_s, log):
    lock = GpuLock(path)
    with lock.shared():
        log.put(("share", time.monotonic()))
        time.sleep(hold_s)
        log.put(("unshare", time.monotonic()))
    time.sleep(hold_s)  # alive but not on the GPU: a timer need not wait for this


def _killed_holder(path, log, flushed):
    """A sharer that is killed while it holds the GPU. It says so (`flushed`) only once its message
    has left for the queue's pipe: killed while its feeder thread still held the queue's write lock,
    it would leave that lock taken, and the next process to put on the queue would hang at exit."""
    lock = GpuLock(path)
    with lock.shared():
        log.put(("share", time.monotonic()))
        log.close()
        log.join_thread()
        flushed.set()
        time.sleep(60)


def _timer_queued(path, timeout_s=10.0):
    """True once a timer holds the turnstile (it is waiting for the sharers)."""
    import fcntl
    import os

    fd = os.open(path + ".turnstile", os.O_RDWR)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                return True
            time.sleep(0.01)
        return False
    finally:
        os.close(fd)


def _compiling_sharer(path, log):
    """Shares until a timer queues, gives the hold up for a CPU-only while (a compile), shares again."""
    lock = GpuLock(path)
    with lock.shared():
        log.put(("share", time.monotonic()))
        assert _timer_queued(path)
        with lock.released():
            log.put(("released", time.monotonic()))
            time.sleep(0.3)
        log.put(("reshared", time.monotonic()))


def _timer(path, work_s, log, name):
    lock = GpuLock(path)
    with lock.shared():  # a candidate times from inside its own shared hold, or outside any
        with lock.alone():
            start = time.monotonic()
            assert lock.held == "alone"
            time.sleep(work_s)
            log.put((name, start, time.monotonic(), lock.waited_alone_s))
        assert lock.held == "shared"


def _events(log, n):
    return [log.get(timeout=30) for _ in range(n)]


def test_timing_waits_for_sharers_and_runs_alone(tmp_path):
    path = str(tmp_path / "gpu.lock")
    ctx = mp.get_context("fork")
    log = ctx.Queue()
    sharer = ctx.Process(target=_sharer, args=(path, 1.0, log))
    sharer.start()
    assert log.get(timeout=10)[0] == "share"
    timers = [ctx.Process(target=_timer, args=(path, 0.3, log, f"t{i}")) for i in range(2)]
    for t in timers:
        t.start()
    events = _events(log, 3)
    for p in (sharer, *timers):
        p.join(10)
        assert p.exitcode == 0  # two timers on one GPU did not deadlock
    unshared = next(t for name, t, *_ in events if name == "unshare")
    spans = sorted((e[1], e[2]) for e in events if e[0].startswith("t"))
    assert all(start >= unshared for start, _ in spans)  # no timing while a sharer works
    assert spans[0][1] <= spans[1][0]  # the two timings never overlap


def test_waiting_timer_holds_back_new_sharers(tmp_path):
    path = str(tmp_path / "gpu.lock")
    ctx = mp.get_context("fork")
    log = ctx.Queue()
    first = ctx.Process(target=_sharer, args=(path, 0.8, log))
    first.start()
    assert log.get(timeout=10)[0] == "share"
    timer = ctx.Process(target=_timer, args=(path, 0.5, log, "timer"))
    timer.start()
    time.sleep(0.2)  # the timer is now queued behind the first sharer
    late = ctx.Process(target=_sharer, args=(path, 0.1, log))
    late.start()
    events = _events(log, 4)
    for p in (first, timer, late):
        p.join(10)
    timer_start, timer_end = next((s, e) for name, s, *rest in events if name == "timer" for e in rest)
    late_share = [t for name, t, *_ in events if name == "share"][-1]
    assert late_share >= timer_end  # the late sharer waited for the queued timing


def test_a_killed_holder_releases_the_gpu(tmp_path):
    path = str(tmp_path / "gpu.lock")
    ctx = mp.get_context("fork")
    log = ctx.Queue()
    flushed = ctx.Event()
    holder = ctx.Process(target=_killed_holder, args=(path, log, flushed))
    holder.start()
    assert log.get(timeout=10)[0] == "share" and flushed.wait(10)
    holder.kill()
    holder.join(10)
    timer = ctx.Process(target=_timer, args=(path, 0.1, log, "timer"))
    timer.start()
    timer.join(10)
    assert timer.exitcode == 0 and log.get(timeout=5)[0] == "timer"


def test_timer_waits_for_gpu_work_not_for_whole_candidates(tmp_path):
    path = str(tmp_path / "gpu.lock")
    ctx = mp.get_context("fork")
    log = ctx.Queue()
    sharer = ctx.Process(target=_sharer, args=(path, 3.0, log))  # on the GPU 3 s, then alive 3 s more
    sharer.start()
    assert log.get(timeout=10)[0] == "share"
    t0 = time.monotonic()
    timer = ctx.Process(target=_timer, args=(path, 0.1, log, "timer"))
    timer.start()
    events = _events(log, 2)
    timer.join(10)
    unshared = next(t for name, t, *_ in events if name == "unshare")
    name, start, end, waited = next(e for e in events if e[0] == "timer")
    assert start >= unshared and start - t0 < 5.5  # ran once the GPU work ended, long before the sharer exited
    assert 1.5 < waited < 5.0
    sharer.kill()


def test_a_sharer_compiling_lets_a_timer_in_and_then_waits_for_it(tmp_path):
    path = str(tmp_path / "gpu.lock")
    ctx = mp.get_context("fork")
    log = ctx.Queue()
    sharer = ctx.Process(target=_compiling_sharer, args=(path, log))
    sharer.start()
    assert log.get(timeout=10)[0] == "share"
    timer = ctx.Process(target=_timer, args=(path, 1.0, log, "timer"))
    timer.start()
    events = _events(log, 3)
    for p in (sharer, timer):
        p.join(10)
        assert p.exitcode == 0
    released = next(t for name, t, *_ in events if name == "released")
    reshared = next(t for name, t, *_ in events if name == "reshared")
    _, start, end, _ = next(e for e in events if e[0] == "timer")
    assert released <= start < released + 0.5  # the timer got the GPU as soon as the compile began
    assert reshared >= end  # and the sharer came back only after the timing
