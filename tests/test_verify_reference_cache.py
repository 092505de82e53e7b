"""A worker keeps each task's reference phase for the task's next candidates: verdicts are the same
with and without it, a task whose weights or inputs do not reproduce is still judged right, and a
candidate cannot change what the next one is compared against."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.sandbox import shared_blobs
from tritonrl_lib.verify.job_order import next_job
from tritonrl_lib.verify.pool import VerifierPool, _Worker
from tritonrl_lib.verify.worker.reference_cache import ReferenceCache, cache_key

pytestmark = pytest.mark.skipif(not shared_blobs.supported(), reason="needs memfd and descriptor passing")

CASES = Path(__file__).parent / "verifier_cases"


def case(kind: str, name: str) -> str:
    return (CASES / kind / f"{name}.py").read_text()


def task(name: str, source: str | None = None) -> Task:
    return Task(id=f"test/{name}", level=1, name=name, source=source or case("tasks", name))


def cached(v) -> bool:
    return bool(v.phases.get("reference_cached"))


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as p:
        yield p


def _summary(v):
    return (v.correct, v.stage, v.reason, v.reward, v.cheat_flags, v.notes,
            [(e["name"], e["ok"], e.get("reason"), e["inputs"]) for e in v.errors])


def test_later_candidates_of_a_task_reuse_its_reference_and_get_the_same_verdicts(pool):
    names = ["relu_ok", "relu_wrong_math", "relu_hardcoded_shape", "adv_constant_output", "relu_ok"]
    with VerifierPool(VerifyConfig(timeout_s=60, reference_cache_mb=0), workers=1, device="cpu", cache=False,
                      progress=False) as plain:
        expected = [_summary(v) for v in plain.map(task("relu"), [case("candidates", n) for n in names])]
    got = pool.map(task("relu"), [case("candidates", n) for n in names])
    assert [_summary(v) for v in got] == expected
    assert got[-1].correct and cached(got[-1]) and sum(cached(v) for v in got) >= len(names) - 1


NONDETERMINISTIC_WEIGHTS = """
import os
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(float(int.from_bytes(os.urandom(4), "little") % 1000003 + 1)))

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""

SCALED_RELU = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(x_ptr, scale_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0) * tl.load(scale_ptr), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        scaled_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, self.scale, out, x.numel(), BLOCK=1024)
        return out
"""


def test_a_task_whose_weights_do_not_reproduce_gets_its_own_reference_each_time(pool):
    t = task("random_weights", NONDETERMINISTIC_WEIGHTS)
    first, second = pool.map(t, [SCALED_RELU, SCALED_RELU])
    assert first.correct and second.correct, (first.error, second.error)
    assert not cached(second)  # the model's digest differed: the child ran its own reference


NONDETERMINISTIC_INPUTS = """
import os
import numpy as np
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    return [torch.from_numpy(rng.standard_normal((16, 64)).astype("float32"))]


def get_init_inputs():
    return []
"""


def test_cached_inputs_travel_with_their_reference_outputs(pool):
    t = task("random_inputs", NONDETERMINISTIC_INPUTS)
    vs = pool.map(t, [case("candidates", "relu_ok")] * 3)
    assert all(v.correct for v in vs), [v.error for v in vs]
    assert cached(vs[-1])  # reused inputs and outputs belong together, whatever get_inputs does


STRIDED_INPUTS = case("tasks", "relu").replace("return [torch.randn(batch_size, dim)]",
                                               "return [torch.randn(dim, batch_size).t()]")


def test_inputs_a_sealed_file_cannot_hold_exactly_are_not_cached(pool):
    assert ".t()" in STRIDED_INPUTS
    vs = pool.map(task("strided", STRIDED_INPUTS), [case("candidates", "relu_ok")] * 2)
    assert all(v.correct for v in vs) and not any(cached(v) for v in vs)


MUTATING_REFERENCE = case("tasks", "relu").replace("        return torch.relu(x)",
                                                   "        x.mul_(2)  # changes its input in place\n"
                                                   "        return torch.relu(x)")
RELU_OF_DOUBLE = case("candidates", "relu_ok").replace("tl.where(x > 0, x, 0.0)", "tl.where(x > 0, 2.0 * x, 0.0)")


def test_a_reference_that_changes_its_inputs_leaves_later_candidates_the_values_it_was_given(pool):
    # the cache kept the inputs after the reference's forward had doubled them: from the second
    # candidate on, a correct kernel ran on doubled inputs against outputs of the original ones
    assert "x.mul_(2)" in MUTATING_REFERENCE and "2.0 * x" in RELU_OF_DOUBLE
    vs = pool.map(task("mutating", MUTATING_REFERENCE), [RELU_OF_DOUBLE] * 3)
    assert all(v.correct for v in vs), [(v.reason, v.error[-300:]) for v in vs]
    assert cached(vs[-1])


TAMPERER = case("candidates", "relu_ok") + '''

def _tamper():
    """Try every memory file this process holds: write, truncate, map writable, reopen for writing."""
    import mmap
    found, done = 0, []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                continue
        except OSError:
            continue
        found += 1
        for attempt in ("write", "truncate", "mmap", "reopen"):
            try:
                if attempt == "write":
                    os.pwrite(fd, bytes(4096), 0)
                elif attempt == "truncate":
                    os.ftruncate(fd, 0)
                elif attempt == "mmap":
                    m = mmap.mmap(fd, 4096)
                    m[:4] = bytes(4)
                else:
                    f = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
                    os.write(f, bytes(4096))
                done.append((fd, attempt))
            except (OSError, ValueError, BufferError):
                pass
    return found, done


import os
FOUND, TAMPERED = _tamper()
_plain_forward = ModelNew.forward
# right only when it found the cached inputs and could change none of them
ModelNew.forward = lambda self, x: _plain_forward(self, x) if FOUND and not TAMPERED else torch.zeros_like(x)
'''


def test_a_candidate_cannot_change_what_the_next_is_compared_against(pool, monkeypatch):
    t = task("relu")
    # past the static check (which refuses `import os`): the guard refuses the descriptor listing ...
    first, tamperer, after = pool.map(t, [case("candidates", "relu_ok"), TAMPERER, case("candidates", "relu_ok")],
                                      static=False)
    assert first.correct and not tamperer.correct and "introspection:descriptors" in tamperer.cheat_flags
    assert after.correct and cached(after), after.error
    # ... and with the guard off too, the sealed files it finds cannot be changed
    monkeypatch.setenv("TRITONRL_UNSAFE_NO_GUARD", "1")
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as bare:
        first, tamperer, after = bare.map(t, [case("candidates", "relu_ok"), TAMPERER, case("candidates", "relu_ok")],
                                          static=False)
    assert first.correct and cached(tamperer)
    assert tamperer.correct, tamperer.error  # it found the inherited input files and changed nothing
    assert after.correct and cached(after), after.error


def test_the_cache_is_bounded_by_bytes_oldest_out():
    def record(n_bytes: int) -> dict:
        blob = bytearray(n_bytes)
        return {"refs": {"original": {"blobs": [blob], "alt": None}}, "notes": [], "models": {"digests": {}},
                "sets": [{"name": "original", "stage": "full", "model_key": "base", "out_specs": [],
                          "inputs": [{"kind": "tensor", "dtype": "uint8", "shape": [n_bytes]}], "blobs": [blob]}]}

    cache = ReferenceCache(max_bytes=12_000)  # a record holds its bytes twice: outputs and inputs
    a = cache.put("a", record(2_000))
    assert len(a.fds) == 1 and os.fstat(a.fds[0]).st_size == 2_000
    cache.put("b", record(2_000))
    assert cache.get("a") is a  # a is now the most recent
    cache.put("c", record(4_000))  # 4 + 4 + 8 kB: b goes
    assert list(cache.entries) == ["a", "c"]
    assert cache.put("huge", record(7_000)) is None  # 14 kB never fits
    cache.put("d", record(2_000))  # a (least recent after c) goes
    assert list(cache.entries) == ["c", "d"]
    assert a.fds == []  # its sealed file was closed with it
    cache.clear()


def test_the_key_is_the_task_and_the_settings_its_reference_phase_reads():
    job = {"task_source": "x", "device": "cpu", "settings": {"num_variations": 5, "atol": 0.01}}
    same = {**job, "settings": {"num_variations": 5, "atol": 0.5}}
    assert cache_key(job) == cache_key(same)
    for other in ({**job, "task_source": "y"}, {**job, "device": "cuda"},
                  {**job, "settings": {"num_variations": 2}}):
        assert cache_key(other) != cache_key(job)


def _next_job(pending, w, others=(), recorded=lambda job: False, alone=()):
    return next_job(pending, w.tasks, [o.tasks for o in others if o is not w], recorded, alone)


def test_a_free_worker_takes_the_next_job_of_a_task_it_ran():
    w = _Worker(slot=0, proc=None, conn=None)  # type: ignore[arg-type]
    pending = collections.deque((i, {"task_source": src}, None) for i, src in enumerate("abab"))
    assert _next_job(pending, w)[0] == 0  # nothing cached yet: the first
    assert _next_job(pending, w)[0] == 2  # a again, ahead of b
    assert _next_job(pending, w)[0] == 1
    assert _next_job(pending, w)[0] == 3
    assert not pending


def test_a_free_worker_leaves_other_workers_tasks_to_them_while_it_has_a_choice():
    mine, busy = (_Worker(slot=n, proc=None, conn=None) for n in range(2))  # type: ignore[arg-type]
    busy.tasks["a"] = True  # a's reference phase is (being) kept by the busy worker
    pending = collections.deque((i, {"task_source": src}, None) for i, src in enumerate("aabca"))
    order = [_next_job(pending, mine, [mine, busy])[0] for _ in range(3)]
    assert order == [2, 3, 0]  # b, then c (nobody's), then a: nothing else is left, so it runs a too
    assert [item[0] for item in pending] == [1, 4]
    assert _next_job(pending, mine, [mine, busy])[0] == 1  # now a is its own task as well


def test_a_free_worker_takes_a_job_whose_reference_the_pool_holds_as_its_own():
    mine, busy = (_Worker(slot=n, proc=None, conn=None) for n in range(2))  # type: ignore[arg-type]
    busy.tasks["a"] = True
    pending = collections.deque((i, {"task_source": src}, None) for i, src in enumerate("bab"))
    # a was busy's alone; once the pool holds its record, a is as good as this worker's own
    assert _next_job(pending, mine, [mine, busy], recorded=lambda job: job["task_source"] == "a")[0] == 1


# --------------------------------------------------------------------------- shared between workers


def _sealed_view(data: bytes) -> memoryview:
    return shared_blobs.map_sealed(shared_blobs.sealed_copy(memoryview(data)), len(data))


def _entry_in(cache: ReferenceCache, key: str) -> object:
    out, alt, small, inp = b"\x01" * 3000, b"\x02" * 3000, b"\x03" * 10, b"\x04" * 5000
    record = {"refs": {"original": {"stage": "full", "metas": [{"kind": "tensor"}], "magnitudes": [1.0],
                                    "inputs": "x", "blobs": [_sealed_view(out), small], "alt": [_sealed_view(alt)]}},
              "notes": ["tiny: n=4"], "models": {"digests": {"base": "d"}, "tiny_overrides": None},
              "sets": [{"name": "original", "stage": "full", "model_key": "base", "out_specs": [[[3000], "uint8"]],
                        "inputs": [{"kind": "tensor", "dtype": "uint8", "shape": [5000]}, {"kind": "value", "value": 3}],
                        "blobs": [_sealed_view(inp)]}]}
    return cache.put(key, record)


def _through_a_socket(desc: dict, fds: list[int]) -> tuple[dict, list[int]]:
    """send_record / recv_fds between two ends of a Connection, as between a worker and the pool."""
    import socket
    from multiprocessing.connection import Connection

    from tritonrl_lib.verify.worker.reference_cache import recv_fds, send_record

    a, b = socket.socketpair()
    ca, cb = Connection(a.detach()), Connection(b.detach())
    try:
        send_record(ca, {"type": "reference", "desc": desc}, fds)
        msg = cb.recv()
        return msg["desc"], recv_fds(cb, msg["nfds"])
    finally:
        ca.close()
        cb.close()


def test_a_record_goes_to_another_worker_as_the_same_sealed_files():
    from tritonrl_lib.verify.worker.reference_cache import export

    mine, theirs = ReferenceCache(1 << 20), ReferenceCache(1 << 20)
    entry = _entry_in(mine, "k")
    desc, fds = export(entry)
    assert len(fds) == 3  # the output, its float32 twin and the input: the small output goes as bytes
    got_desc, got_fds = _through_a_socket(desc, fds)
    adopted = theirs.adopt("k", got_desc, got_fds)
    assert adopted is not None and adopted.nbytes == entry.nbytes and list(theirs.entries) == ["k"]
    rec = adopted.refs["original"]
    assert bytes(rec["blobs"][0]) == b"\x01" * 3000 and rec["blobs"][1] == b"\x03" * 10
    assert bytes(rec["alt"][0]) == b"\x02" * 3000 and rec["magnitudes"] == [1.0] and adopted.notes == ["tiny: n=4"]
    inputs = adopted.sets[0]["inputs"]
    assert inputs[1] == {"kind": "value", "value": 3}
    fd = inputs[0]["fd"]
    assert fd in adopted.fds and os.pread(fd, 5000, 0) == b"\x04" * 5000
    # the very file the first worker holds (no copy), still sealed: nobody can write it
    assert os.fstat(fd).st_ino == os.fstat(entry.sets[0]["inputs"][0]["fd"]).st_ino
    with pytest.raises(OSError):
        os.pwrite(fd, b"x", 0)
    assert all(_closed(f) for f in got_fds)  # every descriptor received was taken over or closed
    mine.clear()
    theirs.clear()
    assert adopted.fds == []


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_a_record_whose_file_is_not_sealed_is_refused():
    from tritonrl_lib.verify.worker.reference_cache import export

    mine, theirs = ReferenceCache(1 << 20), ReferenceCache(1 << 20)
    desc, fds = export(_entry_in(mine, "k"))
    open_file = os.memfd_create("writable")  # the right size, but anyone holding it could change it
    os.ftruncate(open_file, 3000)
    fds = [open_file, *fds[1:]]
    got_desc, got_fds = _through_a_socket(desc, fds)
    os.close(open_file)
    assert theirs.adopt("k", got_desc, got_fds) is None and not theirs.entries
    assert all(_closed(f) for f in got_fds)
    # and a description that names a descriptor it did not bring
    desc2, fds2 = export(mine.get("k"))
    desc2["sets"][0]["inputs"][0]["fd"] = 7
    got_desc, got_fds = _through_a_socket(desc2, fds2)
    assert theirs.adopt("k", got_desc, got_fds) is None and all(_closed(f) for f in got_fds)
    mine.clear()


def test_the_pool_store_is_bounded_and_closes_what_it_drops():
    from tritonrl_lib.verify.worker.reference_cache import PoolStore

    def fds(n: int) -> list[int]:
        return [os.memfd_create("x") for _ in range(n)]

    store = PoolStore(max_bytes=1000, max_fds=4)
    a, b, c = fds(2), fds(2), fds(1)
    assert store.put("gpu0", "a", {"nbytes": 400}, a) and store.put("gpu0", "b", {"nbytes": 400}, b)
    assert store.has("gpu0", "a") and not store.has("gpu1", "a")  # one GPU's records are its own
    assert store.get("gpu0", "a") is not None  # a is now the most recent
    assert store.put("gpu0", "c", {"nbytes": 100}, c)  # 5 descriptors > 4: b (least recent) goes
    assert not store.has("gpu0", "b") and all(_closed(f) for f in b)
    big = fds(1)
    assert not store.put("gpu0", "big", {"nbytes": 2000}, big) and _closed(big[0])  # never fits: closed
    store.close()
    assert all(_closed(f) for f in a + c)


def test_a_worker_that_never_ran_a_task_gets_its_reference_phase_from_another():
    t = task("relu")
    names = ["relu_ok", "relu_wrong_math", "relu_ok", "relu_hardcoded_shape"]
    with VerifierPool(VerifyConfig(timeout_s=60, reference_cache_mb=0), workers=1, device="cpu", cache=False,
                      progress=False) as plain:
        expected = [_summary(v) for v in plain.map(t, [case("candidates", n) for n in names])]
    with VerifierPool(VerifyConfig(timeout_s=60), workers=2, device="cpu", cache=False, progress=False) as p:
        first = p.verify(t, case("candidates", "relu_ok"))  # one worker starts and runs the reference phase
        assert first.correct and not cached(first) and p._slots[1] is None
        got = p.map(t, [case("candidates", n) for n in names])
        second = p._slots[1]
        assert second is not None and cache_key({"task_source": t.source, "device": "cpu", "seeds": p._seeds,
                                                 "settings": {"num_variations": 6}}) in second.ref_keys
    assert [_summary(v) for v in got] == expected  # the same verdicts, wrong ones still wrong
    assert all(cached(v) for v in got), [v.phases for v in got]  # nobody ran the reference phase again


# 80 x 65536 float32: 20 MiB in and 20 MiB out, so about 0.3 GiB over the input sets: more than the
# 32 MiB (in + out) the cache once stopped at (RL's training sizes of KernelBench's element-wise tasks
# are this size), far less than a quarter of the default cache
MID_RELU = case("tasks", "relu").replace("batch_size = 16", "batch_size = 80").replace("dim = 256", "dim = 65536")


def test_a_task_of_tens_of_megabytes_is_cached_and_judged_the_same():
    big_block = case("candidates", "relu_ok").replace("BLOCK_SIZE=1024", "BLOCK_SIZE=1 << 16")
    wrong = big_block.replace("tl.where(x > 0, x, 0.0)", "tl.where(x > 0, 1.5 * x, 0.0)")
    names = [big_block, wrong, big_block]
    with VerifierPool(VerifyConfig(timeout_s=120), workers=1, device="cpu", cache=False, progress=False) as p:
        got = p.map(task("relu_mid", MID_RELU), names)
    assert [v.correct for v in got] == [True, False, True], [(v.reason, v.error[-300:]) for v in got]
    assert not cached(got[0]) and cached(got[1]) and cached(got[2]), [v.phases for v in got]
