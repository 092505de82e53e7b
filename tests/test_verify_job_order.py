"""The order in which the pool hands out jobs: a task whose jobs need their GPU (or host) alone waits until
the shared work is handed out (verify/job_order.py), and only the order changes, never a verdict.

The pool is the real one; its workers are stand-ins speaking the worker protocol over the same socket
pairs (a real worker would need a task too large for this machine's memory to ask for its host alone)."""

from __future__ import annotations

import collections
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.job_order import next_job
from tritonrl_lib.verify.pool import VerifierPool, _Worker
from tritonrl_lib.verify.sandbox import messages as M
from tritonrl_lib.verify.verdict import Verdict

CODE = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```"


def _pending(sources) -> collections.deque:
    return collections.deque((i, {"task_source": src}, None) for i, src in enumerate(sources))


def test_jobs_of_a_task_that_needs_its_gpu_alone_wait_for_the_shared_ones():
    mine = collections.OrderedDict(big=True)  # this worker just ran big: its reference phase is kept
    pending = _pending(["big", "s", "big", "t", "big", "u"])
    order = [next_job(pending, mine, (), alone={"big"})[0] for _ in range(6)]
    assert order == [1, 3, 5, 0, 2, 4]  # s, t, u first whatever the affinity; then the large jobs in order
    assert not pending


def test_without_a_large_task_the_order_is_the_affinity_one():
    mine: collections.OrderedDict = collections.OrderedDict()
    pending = _pending("abab")
    assert [next_job(pending, mine)[0] for _ in range(4)] == [0, 2, 1, 3]


def test_among_large_jobs_alone_the_affinity_rules_still_hold():
    mine, theirs = collections.OrderedDict(), [collections.OrderedDict(x=True)]
    pending = _pending("xyxy")
    # only large jobs are left: y (nobody's) before x (the other worker's), then y again (its own now)
    assert [next_job(pending, mine, theirs, alone={"x", "y"})[0] for _ in range(2)] == [1, 3]


class _StandInWorkers:
    """Workers that answer every job after `run_s`, asking for the host alone first for task `big` and
    for two shares of it for tasks named `mid...`; they record what they were handed, how many jobs ran
    at once whenever a large one ran, the most shares in use at once and the most `mid` jobs at once."""

    def __init__(self, run_s: float = 0.05):
        self.run_s = run_s
        self.handed: list[str] = []
        self.running = 0
        self.alone_breaches = 0
        self.shares_in_use = 0
        self.most_shares = 0
        self.mids = 0
        self.most_mids = 0
        self.lock = threading.Lock()
        self.sleepers: list[subprocess.Popen] = []

    def start(self, pool: VerifierPool, slot: int) -> _Worker:
        ours, theirs = socket.socketpair()
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        self.sleepers.append(proc)  # what the pool signals when it stops the worker
        threading.Thread(target=self._serve, args=(Connection(theirs.detach()), slot), daemon=True).start()
        return _Worker(slot, proc, Connection(ours.detach()))

    def _serve(self, conn: Connection, slot: int) -> None:
        """The worker protocol: READY, then each job run (`_run_job`) and answered with a correct verdict."""
        conn.send({"type": M.READY})
        try:
            while True:
                msg = conn.recv()
                if msg.get("type") == M.STOP:
                    return
                if msg.get("type") != M.JOB:
                    continue  # reference records offered ahead: nothing to keep here
                job = msg["job"]
                self._run_job(conn, slot, job)
                verdict = Verdict(task_id=job["task_id"], stage="full", correct=True, reason="ok", reward=1.0)
                conn.send({"type": M.RESULT, "id": msg["id"], "verdict": verdict.to_dict()})
        except (EOFError, OSError):
            return

    def _run_job(self, conn: Connection, slot: int, job: dict) -> None:
        big, mid = job["task_id"].startswith("big"), job["task_id"].startswith("mid")
        shares = 4 if big else 2 if mid else 1  # the pools below have 4 workers
        with self.lock:
            self.handed.append(job["task_id"])
        if big or mid:
            conn.send({"type": M.EXCLUSIVE, **({"shares": 2} if mid else {})})
            while conn.recv().get("type") != M.EXCLUSIVE_GO:
                pass
        with self.lock:
            self.running += 1
            self.mids += mid
            self.most_mids = max(self.most_mids, self.mids)
            self.shares_in_use += shares
            self.most_shares = max(self.most_shares, self.shares_in_use)
            if big and self.running > 1:
                self.alone_breaches += 1
        time.sleep(self.run_s * (20 if mid else 1))  # long enough for the other mid to be granted
        with self.lock:
            if self.running > 1 and big:
                self.alone_breaches += 1
            self.running -= 1
            self.mids -= mid
            self.shares_in_use -= shares

    def close(self) -> None:
        for p in self.sleepers:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def stand_ins(monkeypatch):
    workers = _StandInWorkers()
    monkeypatch.setattr(VerifierPool, "_start_worker", lambda pool, slot: workers.start(pool, slot))
    yield workers
    workers.close()


def _task(name: str) -> Task:
    return Task(id=name, name=name, level=1, source=f"# task {name}\n")


def test_the_pool_hands_out_a_large_tasks_jobs_after_the_shared_ones(stand_ins, monkeypatch):
    from tritonrl_lib.verify import pool as pool_module

    picks: list[tuple[str, list[str]]] = []  # (what was handed out, what was still pending then)

    def recording(pending, *args, **kwargs):
        item = next_job(pending, *args, **kwargs)
        picks.append((item[1]["task_id"], [p[1]["task_id"] for p in pending]))
        return item

    monkeypatch.setattr(pool_module, "next_job", recording)
    names = ["big_0", "s_1", "s_2", "big_3", "s_4", "s_5", "big_6", "s_7", "s_8"]
    tasks = [_task("big") if n.startswith("big") else _task(n) for n in names]
    with VerifierPool(VerifyConfig(), workers=2, device="cpu", progress=False) as pool:
        verdicts = pool.map(tasks, [CODE] * len(names), static=False)
    assert [v.correct for v in verdicts] == [True] * len(names)  # every verdict, in the caller's order
    assert [v.task_id for v in verdicts] == ["big" if n.startswith("big") else n for n in names]
    bigs = [left for handed, left in picks if handed == "big"]
    assert len(picks) == len(names) and len(bigs) == 3
    # the first large job is met where it stands (nothing says yet that it needs the host alone); once it
    # has asked, the other two are handed out only when no shared job is left
    assert any(t != "big" for t in bigs[0])
    assert all(t == "big" for left in bigs[1:] for t in left)
    assert stand_ins.alone_breaches == 0  # and every large job ran with nothing beside it


def test_jobs_that_need_some_shares_run_together_while_their_shares_fit(stand_ins):
    # four workers: two jobs of two shares each fill the host; a job of all shares waits for both
    names = ["mid_a", "mid_b", "mid_c", "s_1", "mid_d", "s_2", "big", "s_3"]
    tasks = [_task(n) for n in names]
    with VerifierPool(VerifyConfig(), workers=4, device="cpu", progress=False) as pool:
        verdicts = pool.map(tasks, [CODE] * len(names), static=False)
    assert [v.task_id for v in verdicts] == names and all(v.correct for v in verdicts)
    assert stand_ins.most_mids == 2  # two two-share jobs at once: never one at a time, never three
    assert stand_ins.most_shares <= 4  # never more shares in use than the host has workers
    assert stand_ins.alone_breaches == 0


class _GpuStandIns(_StandInWorkers):
    """Stand-ins on the GPUs of `gpu_ids` (slot -> GPU): `big` asks for its GPU alone, `mid` for 2 shares,
    `oom` for 2 shares and then, as after running out of memory there, for the GPU alone. They record the
    most shares in use on each GPU (a GPU's shares: its workers) and the most large jobs running at once."""

    def __init__(self, gpu_ids: list[str]):
        super().__init__(run_s=0.4)
        self.gpu_ids = gpu_ids
        self.capacity = {g: gpu_ids.count(g) for g in gpu_ids}
        self.in_use = collections.Counter()
        self.most_in_use = collections.Counter()
        self.large_running = 0
        self.most_large = 0
        self.reruns_alone = 0

    def _hold(self, conn: Connection, gpu: str, shares: int, asked: int | None) -> None:
        conn.send({"type": M.EXCLUSIVE, **({"shares": asked} if asked else {})})
        while conn.recv().get("type") != M.EXCLUSIVE_GO:
            pass
        with self.lock:
            self.in_use[gpu] += shares
            self.most_in_use[gpu] = max(self.most_in_use[gpu], self.in_use[gpu])
            self.large_running += 1
            self.most_large = max(self.most_large, self.large_running)
        time.sleep(self.run_s)
        with self.lock:
            self.in_use[gpu] -= shares
            self.large_running -= 1

    def _run_job(self, conn: Connection, slot: int, job: dict) -> None:
        gpu = self.gpu_ids[slot]
        kind = job["task_id"].split("_")[0]
        if kind in ("big", "mid", "oom"):
            self._hold(conn, gpu, self.capacity[gpu] if kind == "big" else 2, None if kind == "big" else 2)
            if kind == "oom":
                self._hold(conn, gpu, self.capacity[gpu], None)  # the rerun with the GPU to itself
                with self.lock:
                    self.reruns_alone += 1
        else:
            with self.lock:
                self.in_use[gpu] += 1
                self.most_in_use[gpu] = max(self.most_in_use[gpu], self.in_use[gpu])
            time.sleep(self.run_s / 2)
            with self.lock:
                self.in_use[gpu] -= 1


def test_shares_are_counted_per_gpu_and_a_rerun_alone_waits_for_the_whole_gpu(monkeypatch):
    from tritonrl_lib.verify import pool as pool_module

    gpu_ids = ["0", "0", "0", "0", "1", "1", "1", "1"]
    workers = _GpuStandIns(gpu_ids)
    monkeypatch.setattr(VerifierPool, "_start_worker", lambda pool, slot: workers.start(pool, slot))
    handed_while_waiting = []

    def checking(pending, mine, *args, **kwargs):
        # nothing is handed out on a GPU while a job there waits for shares of it
        w = next(o for o in pool._slots if o is not None and o.tasks is mine)
        if any(o.wants_alone and not o.alone for o in pool._busy_beside(w.slot)):
            handed_while_waiting.append(w.slot)
        return next_job(pending, mine, *args, **kwargs)

    monkeypatch.setattr(pool_module, "next_job", checking)
    names = [f"{kind}_{i}" for i in range(3) for kind in ("big", "mid", "oom", "s", "s", "s")]
    pool = VerifierPool(VerifyConfig(), workers=8, device="cpu", progress=False)
    pool.device, pool._gpu_ids = "cuda", gpu_ids  # two GPUs of four workers each, as a CUDA pool lays them out
    try:
        verdicts = pool.map([_task(n.split("_")[0] if n[0] != "s" else n) for n in names], [CODE] * len(names),
                            static=False)
    finally:
        pool.device = "cpu"
        pool.close()
        workers.close()
    assert [v.correct for v in verdicts] == [True] * len(names)
    assert workers.reruns_alone == 3  # every job that asked twice got the whole GPU the second time
    assert max(workers.most_in_use.values()) <= 4  # never more shares in use on a GPU than it has workers
    assert workers.most_large >= 2  # the two GPUs (or two 2-share jobs on one) ran large jobs at once
    assert handed_while_waiting == []
