"""A worker's spare child (spares.Spare): started ahead of its job, it must become exactly the child
a fresh fork would have been, never decide a verdict by failing, and never count as a candidate's.
The pool tests repeat the whole hostile batch through spares."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.sandbox import shared_blobs, spares
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox.limits import Limits
from tritonrl_lib.verify.sandbox.processes import proc_table_entry
from tritonrl_lib.verify.sandbox.run import run_sandboxed
from tritonrl_lib.verify.sandbox.spares import Spare

from test_verify_pool import ADVERSARIAL, GUARDED, RUNTIME_ONLY, _check, assert_no_leftovers, candidate, task

pytestmark = pytest.mark.skipif(not shared_blobs.supported(), reason="needs memfd and descriptor passing")

LIMITS = Limits(timeout_s=30, memory_limit_mb=0, cap_address_space=False)


def _probe(payload, ch):
    """What a candidate's process sees of its surroundings."""
    import resource

    fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    inherited = {}
    for fd in payload.get("fds", []):
        mine = spares.inherited_fd(fd)
        os.lseek(mine, 0, os.SEEK_SET)
        inherited[str(fd)] = os.read(mine, 100).decode()
    kept = sorted({os.readlink(f"/proc/self/fd/{fd}") for fd in _KEPT})
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    ch.send({"type": "probe", "payload": payload.get("tag"), "cwd": os.getcwd(),
             "cache": os.environ.get("TRITON_CACHE_DIR"), "tmp": os.environ.get("TMPDIR"),
             "session_leader": os.getsid(0) == os.getpid(), "nfds": len(fds), "inherited": inherited,
             "core": resource.getrlimit(resource.RLIMIT_CORE)[0], "ppid": os.getppid(),
             "stdout_is_log": os.path.realpath(f"/proc/self/fd/1").endswith("output.log"),
             "traced_by": status.get("TracerPid", "").strip(), "pid": os.getpid(), "dumpable": _dumpable(),
             "kept": kept})
    os.write(1, b"hello from the candidate\n")  # fd 1 itself: pytest replaces sys.stdout


def _run(tmp_path: Path, name: str, spare=None, payload=None, fds=(), apart=()):
    seen = []
    workdir = tmp_path / name
    workdir.mkdir()
    out = run_sandboxed(lambda ch: _probe(payload, ch), lambda h, b: seen.append(h), LIMITS, str(workdir),
                        inherit_fds=tuple(fds), spare=spare, payload=payload, apart=apart)
    return out, seen, workdir


def _memfd(text: str) -> int:
    fd = os.memfd_create("probe")
    os.write(fd, text.encode())
    return fd


def _no_warm(job_waiting=None) -> None:
    pass


_KEPT: list[int] = []  # descriptors the warm-up opened and keeps, as the CUDA driver keeps its device files


def _warm_takes(numbers: list[int]):
    def warm(job_waiting=None) -> None:
        for n in numbers:  # the very numbers the worker's descriptors have: free here after isolation
            fd = os.open("/dev/zero", os.O_RDONLY)
            os.dup2(fd, n)
            os.close(fd)
            _KEPT.append(n)
    return warm


def test_a_spare_becomes_the_same_child_a_fresh_fork_is(tmp_path):
    fds = [_memfd("first"), _memfd("second")]
    try:
        payload = {"tag": "job", "fds": fds}
        fresh, fresh_seen, _ = _run(tmp_path, "fresh", payload=payload, fds=fds)
        spare = Spare.fork(_probe, _warm_takes(fds))
        # descriptors made after the spare was forked (the worker's cache grows meanwhile) still arrive
        late = _memfd("late")
        payload = {"tag": "job", "fds": [*fds, late]}
        warm, warm_seen, workdir = _run(tmp_path, "spare", spare=spare, payload=payload, fds=[*fds, late])
    finally:
        for fd in fds + [late]:
            os.close(fd)
    assert fresh.kill_reason is None and warm.kill_reason is None, (fresh, warm)
    a, b = fresh_seen[0], warm_seen[0]
    assert b["pid"] == spare.pid  # the spare ran it
    assert b["payload"] == "job" and b["cwd"] == str(workdir) and b["cache"] == str(workdir / "triton_cache")
    assert b["tmp"] == str(workdir) and b["session_leader"] and b["core"] == 0 and b["stdout_is_log"]
    assert b["inherited"] == {str(fds[0]): "first", str(fds[1]): "second", str(late): "late"}
    assert a["inherited"] == {str(fds[0]): "first", str(fds[1]): "second"}
    # what the warm-up opened is untouched (the CUDA driver's files: a job's descriptors arriving on
    # top of them broke the driver), and nothing else is open: the channel and the inherited files
    assert b["kept"] == ["/dev/zero"] and a["kept"] == []
    assert b["nfds"] == a["nfds"] + 1 + len(fds), (a, b)
    assert "hello from the candidate" in warm.log_tail and "hello from the candidate" in fresh.log_tail
    assert fresh.exit_status == warm.exit_status == 0


def test_a_spare_that_died_is_replaced_by_a_fresh_fork(tmp_path):
    spare = Spare.fork(_probe, _no_warm)
    os.kill(spare.pid, signal.SIGKILL)
    time.sleep(0.2)
    out, seen, _ = _run(tmp_path, "dead", spare=spare, payload={"tag": "x"})
    assert out.kill_reason is None and seen and seen[0]["pid"] != spare.pid


def test_a_spare_that_does_not_take_its_job_in_time_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(spares, "SPARE_WAIT_S", 0.5)
    spare = Spare.fork(_probe, lambda _: time.sleep(60))  # a warm-up that hangs
    t0 = time.monotonic()
    out, seen, _ = _run(tmp_path, "slow", spare=spare, payload={"tag": "x"})
    assert out.kill_reason is None and seen[0]["pid"] != spare.pid
    assert time.monotonic() - t0 < 20
    assert proc_table_entry(spare.pid) is None or proc_table_entry(spare.pid).state == "Z"  # killed


def test_the_next_spare_is_neither_counted_nor_killed_with_a_candidate(tmp_path):
    nxt = Spare.fork(_probe, _no_warm)
    try:
        out, seen, _ = _run(tmp_path, "apart", payload={"tag": "x"}, apart=(nxt.identity,))
        assert out.kill_reason is None and out.leftover_processes == 0
        info = proc_table_entry(nxt.pid)
        assert info is not None and info.state != "Z" and info.start == nxt.start  # alive after the kill sweep
        # and it still takes a job afterwards
        out2, seen2, _ = _run(tmp_path, "later", spare=nxt, payload={"tag": "y"})
        assert seen2[0]["pid"] == nxt.pid and seen2[0]["payload"] == "y"
    finally:
        nxt.discard()


def test_a_spare_warming_up_learns_that_its_job_waits(tmp_path):
    """The warm-up may stop early once a job waits (child.warm_child then leaves the cuBLAS and
    cuDNN handles to the job): its probe says no until the job is sent, then yes."""
    mark = tmp_path / "waiting"

    def warm(job_waiting) -> None:
        said = [job_waiting()]
        deadline = time.monotonic() + 20
        while not job_waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        said.append(job_waiting())
        mark.write_text(repr(said))

    spare = Spare.fork(_probe, warm)
    try:
        time.sleep(0.3)
        assert not mark.exists()  # no job yet: still asking
        out, seen, _ = _run(tmp_path, "job", spare=spare, payload={"tag": "w"})
        assert out.kill_reason is None and seen[0]["pid"] == spare.pid and seen[0]["payload"] == "w"
        assert mark.read_text() == "[False, True]"
    finally:
        spare.discard()


def _dumpable() -> int:
    import ctypes

    return ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE


def test_an_idle_spare_is_not_dumpable_and_its_job_is(tmp_path):
    """While it waits, no process of its user may trace it or open its memory and descriptors (a
    candidate running beside it); once it holds its job it is as a fresh child (the worker reads
    its memory use)."""
    mark = tmp_path / "idle"
    spare = Spare.fork(_probe, lambda _: mark.write_text(str(_dumpable())))
    try:
        deadline = time.monotonic() + 10
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.read_text() == "0"
        out, seen, _ = _run(tmp_path, "job", spare=spare, payload={"tag": "z"})
        assert seen[0]["dumpable"] == 1 and seen[0]["traced_by"] == "0"
    finally:
        spare.discard()


# --------------------------------------------------------------------------- through the pool


@pytest.fixture(scope="module")
def spare_pool():
    with VerifierPool(VerifyConfig(timeout_s=10, memory_limit_mb=2500, prestart_child="on"), workers=1, device="cpu",
                      cache=False, progress=False) as p:
        yield p


def test_every_hostile_candidate_gets_the_same_verdict_through_spares(spare_pool):
    names = list(ADVERSARIAL)
    verdicts = spare_pool.map(task("relu"), [candidate(n) for n in names] + [candidate("relu_ok")])
    for name, v in zip(names, verdicts):
        _check(v, name, *ADVERSARIAL[name])
    assert verdicts[-1].correct and verdicts[-1].phases.get("reference_cached")  # inherited sealed inputs
    assert verdicts[-1].phases.get("prestarted")
    assert sum(bool(v.phases.get("prestarted")) for v in verdicts) >= len(verdicts) // 2
    assert_no_leftovers(spare_pool)
    assert len(spare_pool._slots[0].spare_pids) == 1  # one spare waits for the next call (none queued now)


def test_runtime_layer_through_spares(spare_pool):
    names = list(RUNTIME_ONLY)
    cfg = VerifyConfig(timeout_s=90, memory_limit_mb=1500, prestart_child="on")
    verdicts = spare_pool.map(task("relu"), [candidate(n) for n in names] + [candidate("relu_ok")], static=False,
                              config=cfg)
    for name, v in zip(names, verdicts):
        _check(v, name, *GUARDED.get(name, RUNTIME_ONLY[name]))  # the guard stops some before the sandbox
    assert verdicts[-1].correct, verdicts[-1].error
    assert_no_leftovers(spare_pool)


KILLS_SIBLINGS = '''
import os, signal
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


# kill every other child of this worker: the spare that would run the next candidate
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == os.getppid():
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''


def test_a_candidate_that_kills_the_spare_does_not_change_the_next_verdict(spare_pool, monkeypatch):
    vs = spare_pool.map(task("relu"), [KILLS_SIBLINGS, candidate("relu_ok")], static=False)
    assert "process" in vs[0].cheat_flags  # the guard refuses a signal to another process
    assert vs[1].correct and vs[1].reason == "ok", (vs[1].reason, vs[1].error)
    # with the guard off, the kill happens; the next candidate still gets its own, correct verdict
    monkeypatch.setenv("TRITONRL_UNSAFE_NO_GUARD", "1")
    with VerifierPool(VerifyConfig(timeout_s=10, memory_limit_mb=2500, prestart_child="on"), workers=1, device="cpu",
                      cache=False, progress=False) as bare:
        assert bare.verify(task("relu"), candidate("relu_ok")).correct  # a spare is started for the next call
        before = bare._slots[0].spare_pids
        vs = bare.map(task("relu"), [KILLS_SIBLINGS, candidate("relu_ok")], static=False)
        assert vs[0].correct  # a correct kernel; killing its sibling is not what the verifier judges
        assert vs[1].correct and vs[1].reason == "ok", (vs[1].reason, vs[1].error)
        assert not before or bare._slots[0].spare_pids != before
        assert_no_leftovers(bare)
    assert_no_leftovers(spare_pool)


def test_an_idle_worker_gives_its_spare_up(monkeypatch):
    monkeypatch.setenv("TRITONRL_SPARE_IDLE_S", "0.5")
    with VerifierPool(VerifyConfig(timeout_s=30, prestart_child="on"), workers=1, device="cpu", cache=False,
                      progress=False) as pool:
        assert pool.verify(task("relu"), candidate("relu_ok")).correct
        w = pool._slots[0]
        assert len(w.spare_pids) == 1 and all(proc_table_entry(p) is not None for p in w.spare_pids)

        def gone(pid: int) -> bool:
            info = proc_table_entry(pid)
            return info is None or info.state == "Z"

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(gone(p) for p in w.spare_pids):
            time.sleep(0.1)
        assert all(gone(p) for p in w.spare_pids)
        assert pool.verify(task("relu"), candidate("relu_ok") + "\n# again\n").correct  # a fresh fork then


def test_spares_follow_the_jobs_still_queued(monkeypatch):
    from tritonrl_lib.verify.settings import JobSettings
    from tritonrl_lib.verify.sandbox.spares import spares_wanted

    monkeypatch.setenv("TRITONRL_POOL_WORKERS", "4")
    s = JobSettings.for_device(VerifyConfig(spare_children=2), "cuda")
    assert spares_wanted(s, None) == 2  # the pool did not say
    assert [spares_wanted(s, q) for q in (0, 1, 4, 5, 8, 100)] == [1, 1, 1, 2, 2, 2]
    assert spares_wanted(JobSettings.for_device(VerifyConfig(spare_children=3), "cuda"), 100) == 3


def test_a_batch_runs_in_spares_started_after_each_child_is_set_up(tmp_path):
    """Through a one-worker pool: every candidate after the first ran in a spare, two were kept while
    jobs were queued, and after the batch one waits for the next call."""
    with VerifierPool(VerifyConfig(timeout_s=30, prestart_child="on", spare_children=2), workers=1, device="cpu",
                      cache=False, progress=False) as pool:
        vs = pool.map(task("relu"), [candidate("relu_ok") + f"\n# {i}\n" for i in range(4)])
        assert all(v.correct for v in vs)
        assert [bool(v.phases.get("prestarted")) for v in vs] == [False, True, True, True]
        assert len(pool._slots[0].spare_pids) == 1
        assert_no_leftovers(pool)


def test_gpu_workers_get_their_environment_from_the_settings():
    """What a GPU worker (and every candidate process under it) inherits; no GPU needed to check."""
    pool = VerifierPool(VerifyConfig(cuda_connections=1), workers=4, device="cpu", progress=False)
    pool.device, pool._gpu_ids = "cuda", ["0", "0", "1", "1"]  # as on a two-GPU machine
    env = pool.worker_env(2)
    assert (env["CUDA_VISIBLE_DEVICES"], env["TRITONRL_GPU_SHARERS"], env["TRITONRL_POOL_WORKERS"]) == ("1", "2", "4")
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and "TRITON_INTERPRET" not in env
    pool.config = VerifyConfig(cuda_connections=0)
    assert pool.worker_env(0).get("CUDA_DEVICE_MAX_CONNECTIONS") == os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    pool.close()
