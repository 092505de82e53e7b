"""GPU sharing between candidate processes: correctness side by side, each timing alone, no deadlock."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from tritonrl_lib.verify.gpu_lock import GpuLock

pytestmark = pytest.mark.timeout(60)


def _sharer(path, hold_s, log):
    lock = GpuLock(path)
    lock.share()
    log.put(("share", time.monotonic()))
    time.sleep(hold_s)
    log.put(("unshare", time.monotonic()))


def _timer(path, work_s, log, name):
    lock = GpuLock(path)
    lock.share()
    with lock.alone():
        start = time.monotonic()
        time.sleep(work_s)
        log.put((name, start, time.monotonic()))


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
    holder = ctx.Process(target=_sharer, args=(path, 60, log))
    holder.start()
    assert log.get(timeout=10)[0] == "share"
    holder.kill()
    holder.join(10)
    timer = ctx.Process(target=_timer, args=(path, 0.1, log, "timer"))
    timer.start()
    timer.join(10)
    assert timer.exitcode == 0 and log.get(timeout=5)[0] == "timer"
