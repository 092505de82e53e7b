"""The shortcuts that make the verifier faster keep its guarantees: a verdict no longer waits for its
candidate's processes to finish exiting, yet none of them acts again and none is counted against the
next candidate; the reference cache keeps the child's own sealed files instead of copying them;
output memfds made ahead hold exactly what a fresh one would; CPU-only work inside a GPU section
gives the GPU lock up; the trace a diagnostic run asks for is complete and in order."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import time
import types
from pathlib import Path

import pytest
import torch

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.sandbox import processes, shared_blobs
from tritonrl_lib.verify.sandbox.gpu_lock import GpuLock
from tritonrl_lib.verify.sandbox.limits import Limits, memory_share_bytes
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.worker.reference_cache import ReferenceCache
from tritonrl_lib.verify.sandbox.processes import kill_tree, proc_table, proc_table_entry
from tritonrl_lib.verify.sandbox.run import run_sandboxed
from tritonrl_lib.verify.settings import JobSettings
from tritonrl_lib.verify.candidate.context import Child
from tritonrl_lib.verify.candidate.encoding import blanks_for, encode_outputs, release_blanks
from tritonrl_lib.verify.candidate.reference_phase import ReferencePhase

from test_verify_pool import candidate, task

pytestmark = pytest.mark.skipif(not shared_blobs.supported(), reason="needs memfd and descriptor passing")

LIMITS = Limits(timeout_s=30, memory_limit_mb=0, cap_address_space=False)


def _gone(pid: int) -> bool:
    info = proc_table_entry(pid)
    return info is None or info.state == "Z"


def _wait_gone(pids: list[int], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


# --------------------------------------------------------------------------- ending without waiting


def test_a_tree_killed_without_waiting_never_acts_again(tmp_path):
    """Two processes that append to a file every millisecond (one forks the other): once kill_tree
    returns without waiting, the file never grows again, and both are remembered as dying until gone."""
    log = tmp_path / "ticks"
    pid = os.fork()
    if pid == 0:  # the tree: a session of its own, like a candidate's
        os.setsid()
        os.fork()
        while True:
            with open(log, "a") as f:
                f.write("x")
            time.sleep(0.001)
    time.sleep(0.3)
    tree = [p.pid for p in proc_table().values() if p.sid == pid]
    assert len(tree) == 2
    kill_tree(os.getpid(), sids=(pid,), wait=False)
    size = log.stat().st_size
    time.sleep(0.3)
    assert log.stat().st_size == size  # nothing of the tree wrote after the call returned
    assert _wait_gone(tree)
    processes.reap_children()
    assert not processes.dying()  # gone: no longer kept apart


def _final_after_sleeping_child(spawn: bool):
    def child(ch):
        if spawn and os.fork() == 0:
            time.sleep(60)  # left behind by the candidate
            os._exit(0)
        ch.send({"type": "done"})
        time.sleep(60)  # what a slow exit looks like to the worker (a CUDA context's teardown)
    return child


@pytest.mark.parametrize("spawn", [False, True])
def test_the_last_message_ends_the_child_at_once(tmp_path, spawn):
    (tmp_path / "w").mkdir()
    t0 = time.monotonic()
    out = run_sandboxed(_final_after_sleeping_child(spawn), lambda h, b: "final", LIMITS, str(tmp_path / "w"))
    assert time.monotonic() - t0 < 5  # not the child's 60 s
    assert out.kill_reason is None and out.leftover_processes == (1 if spawn else 0)
    me = os.getpid()
    assert _wait_gone([p.pid for p in processes.descendants(me, proc_table())])


def test_processes_still_exiting_are_not_the_next_candidates(tmp_path):
    """A process a verdict killed without waiting may still be exiting when the next candidate starts:
    kept apart by pid and start time, it is neither counted (a limit of one process would trip) nor
    killed with it. A live process in the dying set stands in for one still exiting."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(60)
        os._exit(0)
    try:
        info = proc_table_entry(pid)
        processes._DYING.add((pid, info.start))  # as kill_tree(wait=False) leaves it
        (tmp_path / "w").mkdir()

        def counts(ch):
            ch.send({"type": "done"})

        out = run_sandboxed(counts, lambda h, b: "final", Limits(timeout_s=30, memory_limit_mb=0,
                                                                    cap_address_space=False, max_processes=1),
                            str(tmp_path / "w"))
        assert out.kill_reason is None and out.leftover_processes == 0
        assert not _gone(pid)  # not killed as the candidate's
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        processes._DYING.discard((pid, info.start))


# --------------------------------------------------------------------------- the reference cache


def test_the_cache_keeps_the_childs_sealed_file_not_a_copy():
    data = bytes(range(256)) * (shared_blobs.SHARE_MIN_BYTES // 256 + 3)
    sent = shared_blobs.sealed_copy(memoryview(data))
    a, b = shared_blobs.socket_pair()
    try:
        shared_blobs.send_fds(b, [sent])
        (view,) = shared_blobs.receive_blobs(a, {"mapped": [[0, len(data)]]}, [], 1 << 30)
    finally:
        a.close()
        b.close()
    assert bytes(view) == data and shared_blobs.sealed_file(view) is not None
    assert shared_blobs.sealed_file(view[1:]) is None  # only a whole mapping names its file
    plain = memoryview(bytearray(data))
    collected = {"refs": {}, "notes": [], "models": {}, "sets": [
        {"name": "original", "stage": "full", "model_key": "base", "out_specs": [],
         "inputs": [{"kind": "tensor"}, {"kind": "tensor"}], "blobs": [view, plain]}]}
    cache = ReferenceCache(1 << 30)
    entry = cache.put("k", collected)
    kept, copied = entry.fds
    assert os.fstat(kept).st_ino == os.fstat(sent).st_ino  # the very file the child sealed
    assert os.fstat(copied).st_ino != os.fstat(sent).st_ino  # plain bytes: a sealed copy
    for fd in (kept, copied):
        assert fcntl.fcntl(fd, shared_blobs._F_GET_SEALS) & shared_blobs._SEALS == shared_blobs._SEALS
        assert os.pread(fd, len(data), 0) == data
    cache.clear()
    os.close(sent)


def test_each_workers_cache_gets_its_share_of_the_machine(monkeypatch):
    monkeypatch.setenv("TRITONRL_POOL_WORKERS", "1")
    one = memory_share_bytes()
    if one is None:
        pytest.skip("no /proc/meminfo")
    monkeypatch.setenv("TRITONRL_POOL_WORKERS", "4")
    assert memory_share_bytes() == one // 4 and one * 4 <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


# --------------------------------------------------------------------------- outputs made ahead


def test_outputs_sealed_into_memfds_made_ahead_are_the_same_bytes():
    outs = [torch.randn(1 << 19), torch.arange(1 << 18, dtype=torch.int32).reshape(512, 512), torch.ones(3)]
    specs = [(tuple(o.shape), o.dtype) for o in outs]
    blanks = blanks_for(specs)
    assert sorted(blanks) == [1 << 20, 1 << 21]  # the small one travels inline
    made = {n: [b.fd for b in lst] for n, lst in blanks.items()}
    metas, blobs = encode_outputs(outs, seal=True, blanks=blanks)
    plain_metas, plain_blobs = encode_outputs(outs, seal=True)
    assert metas == plain_metas
    for got, want in zip(blobs, plain_blobs):
        data = got.read() if isinstance(got, shared_blobs.SealedBlob) else bytes(got)
        assert data == (want.read() if isinstance(want, shared_blobs.SealedBlob) else bytes(want))
    used = [b.fd for b in blobs if isinstance(b, shared_blobs.SealedBlob)]
    assert sorted(used) == sorted(fd for fds in made.values() for fd in fds)  # filled the ones made ahead
    assert all(not lst for lst in blanks.values())
    for b in blobs + plain_blobs:
        if isinstance(b, shared_blobs.SealedBlob):
            b.close()
    spare = blanks_for(specs)
    fds = [b.fd for lst in spare.values() for b in lst]
    release_blanks(spare)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)  # unused ones are closed


# --------------------------------------------------------------------------- the GPU lock


def test_inputs_are_drawn_on_the_device_and_the_same_every_time():
    """A KernelBench task's torch.rand draws straight on the device (here the meta device stands in for the
    GPU), under the set's seed, so every draw of a set gives the same values and no host copy is made."""
    from tritonrl_lib.verify.candidate.input_sets import drawer

    def get_inputs():
        return [torch.rand(4, 8), torch.randint(0, 5, (3,))]

    on_meta = drawer(get_inputs, seed=7, device="meta")()
    assert all(t.device.type == "meta" for t in on_meta) and on_meta[0].shape == (4, 8)
    make = drawer(get_inputs, seed=7, device="cpu")
    a, b = make(), make()
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and a[0] is not b[0]
    assert not torch.equal(drawer(get_inputs, seed=8, device="cpu")()[0], a[0])

def test_a_traced_verdict_says_when_each_point_was_reached(monkeypatch):
    monkeypatch.setenv("TRITONRL_TRACE", "1")
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as pool:
        v = pool.verify(task("relu"), candidate("relu_ok"))
    assert v.correct
    order = ["@sent", "@job", "@launched", "@setup", "@ref_model", "@ref:tiny", "@ref:original", "@built",
             "@cand:tiny", "@gate:tiny", "@cand:original", "@gate:full", "@done", "@end", "@back"]
    times = [v.phases[k] for k in order]
    assert times == sorted(times), dict(zip(order, times))
    assert abs((v.phases["@end"] - v.phases["@job"]) - v.duration_s) < 0.05  # one clock for all of them
    # the child's CPU time at each of its own points: it never decreases, and the reference and candidate
    # phases of an interpreted relu cost some
    cpu = [v.phases[f"${k[1:]}"] for k in order if f"${k[1:]}" in v.phases]
    assert len(cpu) >= 6 and cpu == sorted(cpu) and cpu[-1] > cpu[0] >= 0, cpu


def test_an_untraced_verdict_has_no_trace(monkeypatch):
    monkeypatch.delenv("TRITONRL_TRACE", raising=False)
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as pool:
        v = pool.verify(task("relu"), candidate("relu_ok"))
    assert v.correct and not [k for k in v.phases if k[0] in "@%|$"]


def test_no_memfd_ahead_is_no_failure(monkeypatch):
    def refuse(nbytes, populate=True):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(shared_blobs, "BlankBlob", refuse)
    assert blanks_for([((1 << 20,), torch.float32)]) == {}  # encoding will make its own (or fail there)
