"""Room on a GPU for large jobs (gpu_admission.py) as pure functions: which waiting requests are granted
beside which running jobs, in order, the whole GPU only when it is empty, the host's room counted; the
worker's side: the budget a job granted room runs with, what it asks for (the reference outputs its
worker really holds, ReferencePhase.room_for's choices replayed), and when it runs again alone."""

from __future__ import annotations

import types

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify import reasons as R
from tritonrl_lib.verify.candidate.reference_phase import ReferencePhase
from tritonrl_lib.verify.candidate.variations import VARIATION_ORDER
from tritonrl_lib.verify.gpu_admission import (ROOM_MARGIN, Admission, Ask, admit, ask_message, counted, in_room,
                                               scope_room)
from tritonrl_lib.verify.sandbox import messages as M
from tritonrl_lib.verify.sandbox.footprint import measure
from tritonrl_lib.verify.sandbox.limits import (CONTEXT_BYTES, GIB, GPU_MEMORY_FRACTION, HOST_BASE_BYTES,
                                                HOST_REFERENCE_SHARE, REFERENCE_SET_SIZES, Budget,
                                                reference_outputs_held)
from tritonrl_lib.verify.settings import JobSettings
from tritonrl_lib.verify.worker.job import rerun_alone_why

H200 = int(139.8 * GIB)  # what torch reports of an H200
HOST = 2000 * GIB
SETTINGS = JobSettings.for_device(VerifyConfig(), "cuda")
ROOM = scope_room("cuda", H200, HOST, 12)  # an H200 shared by 12 workers, a large host


def ask(need_gib: float, seq: int, host_gib: float = 1.0, alone: bool = False) -> Ask:
    return Ask(int(need_gib * GIB), int(host_gib * GIB), alone, seq)


# --------------------------------------------------------------------------- the rule


def test_the_room_of_a_gpu_and_of_the_host_as_the_budgets_read_them():
    assert ROOM.device_bytes == pytest.approx(GPU_MEMORY_FRACTION * H200)
    assert ROOM.host_bytes == pytest.approx(HOST_REFERENCE_SHARE * HOST)
    assert ROOM.overhead_bytes == CONTEXT_BYTES and ROOM.sharers == 12
    cpu = scope_room("cpu", 64 * GIB, 64 * GIB, 4)  # on the CPU the host's share is the "GPU"
    assert cpu.device_bytes == pytest.approx(0.5 * 64 * GIB) and cpu.overhead_bytes == HOST_BASE_BYTES
    # a job counts its need, a tenth more, and its process's own
    assert counted(ask(20, 0, host_gib=3), ROOM) == pytest.approx((20 * 1.1 * GIB + CONTEXT_BYTES, 3 * 1.1 * GIB))


def test_kernelbench_large_jobs_measured_on_h200s_run_three_or_four_at_once():
    # the evaluation's large candidates needed 18-30 GiB: four of those fit the 125.8 GiB room of an H200
    waiting = [ask(30, 0), ask(25, 1), ask(20, 2), ask(18, 3), ask(25, 4)]
    granted = admit(waiting, [], 0, ROOM)
    assert [a.seq for a in granted] == [0, 1, 2, 3]  # 34 + 28.5 + 23 + 20.8 GiB; the fifth (28.5) does not fit
    assert admit(waiting[4:], granted, 0, ROOM) == []
    assert [a.seq for a in admit(waiting[4:], granted[1:], 0, ROOM)] == [4]  # once the first ends


def test_in_order_a_later_smaller_request_never_overtakes_one_that_waits():
    running = [ask(60, 0)]  # 67 GiB counted of 125.8
    waiting = [ask(60, 2), ask(5, 3)]  # the 5 GiB one would fit beside; the 60 GiB one does not
    assert admit(waiting, running, 0, ROOM) == []
    assert [a.seq for a in admit(waiting, [], 0, ROOM)] == [2, 3]
    # the order is the order of the requests, whatever order they are listed in
    assert [a.seq for a in admit(list(reversed(waiting)), running[:0], 0, ROOM)] == [2, 3]


def test_a_request_larger_than_the_room_goes_once_nothing_else_runs():
    huge = ask(120, 1)  # 133 GiB counted: more than the room with the margin, yet its budget fits alone
    assert admit([huge], [ask(1, 0)], 0, ROOM) == []
    assert admit([huge], [], 1, ROOM) == []
    assert admit([huge, ask(1, 2)], [], 0, ROOM) == [huge]  # and nothing beside it


def test_the_whole_gpu_waits_for_an_empty_gpu_and_has_nothing_beside_it():
    alone = ask(1, 0, alone=True)
    assert admit([alone], [ask(10, 5)], 0, ROOM) == []  # a job in its room still runs
    assert admit([alone], [], 1, ROOM) == []  # a job in a worker's share still runs
    assert admit([alone, ask(1, 1)], [], 0, ROOM) == [alone]  # granted alone: nothing after it
    assert admit([ask(1, 1)], [alone], 0, ROOM) == []  # nor while it runs
    # first in line, it holds back the requests behind it (it would wait for ever otherwise)
    assert admit([alone, ask(1, 1)], [ask(10, 5)], 0, ROOM) == []


def test_host_room_is_counted():
    room = scope_room("cuda", H200, 100 * GIB, 12)  # 40 GiB of host room
    waiting = [ask(10, 0, host_gib=20), ask(10, 1, host_gib=20)]  # 22 GiB counted each: one fits
    assert [a.seq for a in admit(waiting, [], 0, room)] == [0]
    assert [a.seq for a in admit(waiting, [], 0, scope_room("cuda", H200, 120 * GIB, 12))] == [0, 1]


def test_jobs_in_a_workers_share_count_their_share():
    # 12 workers: a shared job counts 1/12 of the room (10.5 GiB of an H200's 125.8)
    assert [a.seq for a in admit([ask(20, 0)], [], 11, ROOM)] == []  # 11 shares leave 10.5 GiB
    assert [a.seq for a in admit([ask(20, 0)], [], 9, ROOM)] == [0]  # 9 leave 31.5 GiB: 23 counted fits
    host = scope_room("cuda", H200, 120 * GIB, 12)  # 48 GiB host room, 4 GiB a share
    assert admit([ask(1, 0, host_gib=40)], [], 2, host) == []
    assert [a.seq for a in admit([ask(1, 0, host_gib=35)], [], 2, host)] == [0]


# --------------------------------------------------------------------------- the pool's bookkeeping


def message(need_gib: float, host_gib: float = 1.0, alone: bool = False) -> M.ExclusiveMessage:
    return M.ExclusiveMessage(type=M.EXCLUSIVE, need_bytes=int(need_gib * GIB), host_bytes=int(host_gib * GIB),
                              total_bytes=H200, host_total=HOST, alone=alone)


def test_the_pool_grants_in_order_per_gpu_and_frees_room_when_jobs_end():
    adm = Admission("cuda", {"0": 12, "1": 12})
    running = {s: ("0" if s < 12 else "1") for s in (0, 1, 2, 3, 12)}  # slot -> its GPU
    assert adm.to_grant(running) == [] and not adm.reserved("0")
    adm.asked(1, "0", message(50))
    adm.asked(2, "0", message(50))
    adm.asked(3, "0", message(50))
    adm.asked(12, "1", message(50))
    assert adm.reserved("0") and adm.reserved("1") and adm.waiting(1)
    # GPU 0: slot 0 runs in its share (10.5 GiB): two of 56 GiB fit beside it, the third waits
    assert adm.to_grant(running) == [1, 2, 12]
    assert not adm.waiting(1) and adm.waiting(3) and adm.most_side_by_side == 2
    assert adm.to_grant(running) == []
    adm.ended(0)  # the shared job ends: 112 of 125.8 GiB, still no room for 56 more
    del running[0]
    assert adm.to_grant(running) == []
    adm.ended(1)
    del running[1]
    assert adm.to_grant(running) == [3]
    for slot in (2, 3, 12):
        adm.ended(slot)
    assert not adm.reserved("0") and not adm.reserved("1") and not adm.asks and not adm.granted


def test_a_job_asking_again_for_the_whole_gpu_keeps_its_place_and_waits_for_an_empty_gpu():
    adm = Admission("cuda", {"0": 12})
    running = {1: "0", 2: "0", 3: "0"}
    adm.asked(1, "0", message(30))
    adm.asked(2, "0", message(30))
    assert adm.to_grant(running) == [1, 2]
    adm.asked(3, "0", message(30))
    adm.asked(1, "0", message(30, alone=True))  # ran out of memory in its room
    assert adm.waiting(1) and adm.asks[1][1].alone and adm.asks[1][1].seq == 0
    assert adm.to_grant(running) == []  # slot 2 still runs; slot 3, behind it, waits too
    adm.ended(2)
    del running[2]
    assert adm.to_grant(running) == [1]
    assert adm.to_grant(running) == []  # nothing beside the job alone
    adm.ended(1)
    del running[1]
    assert adm.to_grant(running) == [3]


def test_a_request_without_its_needs_is_for_the_whole_gpu():
    assert Ask.from_message({"type": M.EXCLUSIVE}, 0).alone
    assert not Ask.from_message(message(1), 0).alone
    assert Ask.from_message({"type": M.EXCLUSIVE, "need_bytes": "x", "host_bytes": -3}, 0) == Ask(0, 0, False, 0)


# --------------------------------------------------------------------------- the worker's side

LARGE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x)

batch_size = 16384
dim = 32768

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def large():
    return measure(LARGE)  # 2 GiB in, 2 GiB out: 5.4e8 elements, like KernelBench's largest


def test_a_large_tasks_budget_asks_for_its_need_and_the_outputs_its_worker_holds(large):
    b = Budget.for_task(large, SETTINGS, "cuda", H200, HOST, 12)
    assert b.exclusive and not b.skip_sets and 10 * GIB < b.need_bytes < 0.9 * H200 / 3
    out = large.output_bytes
    # original, range, seed, larger (x2 grown), dtype (counted twice), offset, its timed checks (one: four
    # 2 GiB outputs would pass TIMED_KEEP_BYTES), and the tiny set
    assert b.timed_checks == 1
    assert b.held_bytes == int(out * (1 + 1 + 1 + b.larger_growth + 2 + 1 + 1 + 1))
    assert b.host_need_bytes == b.held_bytes + 2 * int(out * b.larger_growth)  # and two outputs on their way
    msg = ask_message(in_room(b, "cuda", H200), H200, HOST)
    assert (msg["type"], msg["need_bytes"], msg["host_bytes"], msg["total_bytes"], msg["alone"]) == \
        (M.EXCLUSIVE, b.need_bytes, b.host_need_bytes, H200, False)
    assert ask_message(b, H200, HOST, alone=True)["alone"]


def test_a_job_granted_room_runs_in_what_it_counted(large):
    b = Budget.for_task(large, SETTINGS, "cuda", H200, HOST, 12)
    r = in_room(b, "cuda", H200)
    assert r.gpu_fraction == pytest.approx((b.need_bytes * (1 + ROOM_MARGIN) + CONTEXT_BYTES) / H200)
    assert r.gpu_fraction * H200 == pytest.approx(counted(Ask(b.need_bytes, b.host_need_bytes), ROOM)[0])
    assert r.gpu_fraction < b.gpu_fraction == pytest.approx(GPU_MEMORY_FRACTION)
    assert r.reference_bytes == int(b.held_bytes * (1 + ROOM_MARGIN)) < b.reference_bytes
    assert dict(r.to_json(), gpu_fraction=0, reference_bytes=0) == dict(b.to_json(), gpu_fraction=0,
                                                                       reference_bytes=0)
    # never more than the whole GPU's fraction or the budget's cap
    assert in_room(Budget(0.9, True, 1, 1, 1, 1.0, 1.0, False, need_bytes=200 * GIB), "cuda", H200).gpu_fraction \
        == 0.9
    cpu = Budget.for_task(large, JobSettings.for_device(VerifyConfig(), "cpu"), "cpu", None, 64 * GIB, 64)
    assert cpu.exclusive and in_room(cpu, "cpu", 64 * GIB).gpu_fraction == 0.0


def replay(budget: Budget, out: int, tiny: int, device: str = "cuda") -> tuple[list[str], int]:
    """ReferencePhase.run's choice of sets under `budget` (its own room_for), with every set's outputs as
    large as REFERENCE_SET_SIZES says: the sets kept and the bytes the worker holds."""
    notes: list[str] = []
    phase = types.SimpleNamespace(budget=budget, original_out_bytes=out, sent_bytes=tiny + out,
                                  SET_SIZES=ReferencePhase.SET_SIZES,
                                  child=types.SimpleNamespace(note=notes.append))
    kept = []
    for name in VARIATION_ORDER[1:]:
        if name != "range" and not ReferencePhase.room_for(phase, name):
            continue
        kept.append(name)
        size = (budget.larger_growth or budget.larger_factor) if name == "larger" else REFERENCE_SET_SIZES.get(name, 1)
        phase.sent_bytes += int(size * out)
    for k in range(budget.timed_checks if device == "cuda" else 0):
        if not ReferencePhase.room_for(phase, "timed"):
            break
        kept.append(f"timed:{k}")
        phase.sent_bytes += out
    return kept, phase.sent_bytes


def test_the_sets_a_job_keeps_are_the_same_in_its_room_as_alone(large):
    assert REFERENCE_SET_SIZES == ReferencePhase.SET_SIZES  # limits.py replays the reference phase's table
    out = large.output_bytes
    binding = 0
    for host_gib in (24, 32, 48, 64, 96, 2000):
        b = Budget.for_task(large, SETTINGS, "cuda", H200, host_gib * GIB, 12)
        r = in_room(b, "cuda", H200)
        for tiny in (0, out // 64, out):  # the tiny set's outputs: small, at most the original's
            alone, held = replay(b, out, tiny)
            roomed, held_in_room = replay(r, out, tiny)
            assert roomed == alone, (host_gib, tiny)
            assert held_in_room == held <= b.held_bytes <= b.host_need_bytes
        binding += len(alone) < len(VARIATION_ORDER) - 1 + b.timed_checks  # the cap left sets out here
    assert binding  # some of these hosts are small enough for the cap to decide


def test_reference_outputs_held_follows_the_cap():
    wanted = VARIATION_ORDER
    assert reference_outputs_held(10, wanted, (), 2.0, 4, 0) == 10 * (1 + 1 + 1 + 2 + 2 + 1 + 4 + 1)
    assert reference_outputs_held(10, wanted, ("larger", "dtype"), 2.0, 0, 0) == 10 * (1 + 1 + 1 + 1 + 1)
    # a cap of 35: original, range, seed (30), larger would make 50, dtype 50, offset 40: none; then the tiny set
    assert reference_outputs_held(10, wanted, (), 2.0, 4, 35) == 10 * (3 + 1)
    assert reference_outputs_held(10, wanted, (), 2.0, 4, 20) == 10 * (2 + 1)  # range is never left out


def test_when_a_job_runs_again_with_the_gpu_to_itself(large):
    b = Budget.for_task(large, SETTINGS, "cuda", H200, HOST, 12)
    room = in_room(b, "cuda", H200)
    oom = {"reason": R.OUT_OF_MEMORY, "error": "CUDA out of memory"}
    short = {"reason": R.OK, "correct": True,
             "notes": [("variation offset skipped: its reference outputs (2.0 GiB) would not fit beside the 20.0 GiB "
                        "held already (this job may hold 21.0 GiB of the host's memory)")]}
    ok = {"reason": R.OK, "correct": True}
    # in its room: out of GPU memory, or a set left out for want of its room's host memory
    cause, detail = rerun_alone_why(oom, "cuda", b, room, 12)
    assert "room it was given beside other large jobs" in cause and detail == f"{room.gpu_fraction:.0%} of the GPU"
    assert "host memory" in rerun_alone_why(short, "cuda", b, room, 12)[0]
    assert "host memory" in rerun_alone_why(short, "cpu", b, room, 12)[0]
    assert rerun_alone_why(ok, "cuda", b, room, 12) is None
    assert rerun_alone_why(oom, "cpu", b, room, 12) is None  # the CPU's memory limit is not the room's
    # alone already: the verdict stands
    assert rerun_alone_why(oom, "cuda", b, b, 12) is None
    # in a worker's share, as before
    small = Budget.for_task(measure(LARGE.replace("16384", "16")), SETTINGS, "cuda", H200, HOST, 12)
    assert not small.exclusive
    assert rerun_alone_why(oom, "cuda", small, small, 12) == (
        "the first run ran out of GPU memory in this worker's share", f"{small.gpu_fraction:.0%} of the GPU")
    assert rerun_alone_why(oom, "cuda", small, small, 1) is None
    assert rerun_alone_why(short, "cuda", small, small, 12) is None
