"""Large jobs side by side in a real pool on the CPU (gpu_admission.py): two jobs whose tasks do not fit a
worker's share of the host ask for room; where the room holds both they run at once, where it holds one
they run one after the other; either way each gets its right verdict.

The pool is made with enough workers for a worker's share of this host to be smaller than the task (a
budget's share is the host over 4 x workers on the CPU): only two of them start, one per job. The room
of the host is set from the jobs' own need (gpu_admission.scope_room replaced): 2.5 of what one counts,
or 1.5. Grants wait until both jobs have asked (Admission.to_grant held back until then), so whether
they run together is the room's decision, not a race between the workers' start-ups."""

from __future__ import annotations

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify import gpu_admission
from tritonrl_lib.verify.gpu_admission import Admission, Ask, Room, counted
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox.footprint import probe
from tritonrl_lib.verify.sandbox.limits import (HOST_GPUS_ENV, HOST_POOLS_ENV, Budget, host_memory_bytes,
                                                host_share_bytes)
from tritonrl_lib.verify.settings import JobSettings

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 1024
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

SOLUTION = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0) * SCALE, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 65536),)](x, out, n, BLOCK_SIZE=65536)
        return out
'''
RIGHT, WRONG = SOLUTION.replace("SCALE", "1.0"), SOLUTION.replace("SCALE", "2.0")
CONFIG = VerifyConfig(prescreen="off", timeout_s=120)


@pytest.fixture(scope="module")
def sized():
    """(workers, need): a pool size at which the task's budget is exclusive on this host, and its need."""
    mp = pytest.MonkeyPatch()
    for k in (HOST_POOLS_ENV, HOST_GPUS_ENV, "TRITONRL_POOL_WORKERS"):
        mp.delenv(k, raising=False)
    try:
        if host_memory_bytes() is None:
            pytest.skip("no /proc/meminfo: no host share to budget")
        fp = probe(TASK)
        assert fp is not None
        settings = JobSettings.for_device(CONFIG, "cpu")
        for workers in (2 ** k for k in range(3, 14)):
            b = Budget.for_task(fp, settings, "cpu", None, host_share_bytes(), workers)
            if b.exclusive:
                assert not b.too_large and b.need_bytes > 0 and b.host_need_bytes > 0
                return workers, b
        pytest.skip("the task fits a worker's share of this host at any pool size")
    finally:
        mp.undo()


def run_two(monkeypatch, sized, fits: float) -> tuple[VerifierPool, list]:
    workers, budget = sized
    for k in (HOST_POOLS_ENV, HOST_GPUS_ENV):
        monkeypatch.delenv(k, raising=False)
    real_room = gpu_admission.scope_room

    def room(device, total, host, sharers):
        base = real_room(device, total, host, sharers)
        assert device == "cpu" and sharers == workers
        one = counted(Ask(budget.need_bytes, budget.host_need_bytes), base)
        return Room(fits * one[0], fits * one[1], base.overhead_bytes, sharers)

    monkeypatch.setattr(gpu_admission, "scope_room", room)
    real_grant, asked = Admission.to_grant, []

    def to_grant(self, running):
        if len(self.asks) >= 2:
            asked.append(True)
        return real_grant(self, running) if asked else []

    monkeypatch.setattr(Admission, "to_grant", to_grant)
    task = Task(id="test/large_relu", level=1, name="large_relu", source=TASK)
    pool = VerifierPool(CONFIG, workers=workers, device="cpu", cache=False, progress=False)
    try:
        verdicts = pool.map([task, task], [RIGHT, WRONG])
    finally:
        pool.close()
    assert asked, "the two jobs never both asked for room: they were not large"
    assert pool.restarts == 0  # no worker lost
    return pool, verdicts


def check(verdicts) -> None:
    right, wrong = verdicts
    assert right.correct and right.reason == "ok", (right.reason, right.error, right.notes)
    assert (wrong.correct, wrong.reason) == (False, "mismatch:tiny"), (wrong.reason, wrong.error)
    for v in verdicts:
        assert not any("ran again" in n for n in v.notes), v.notes


def test_two_large_jobs_that_fit_the_room_run_side_by_side(monkeypatch, sized):
    pool, verdicts = run_two(monkeypatch, sized, fits=2.5)
    check(verdicts)
    assert pool.admission.most_side_by_side == 2
    assert not pool.admission.asks and not pool.admission.granted  # every room given back


def test_two_large_jobs_that_do_not_fit_together_run_one_after_the_other(monkeypatch, sized):
    pool, verdicts = run_two(monkeypatch, sized, fits=1.5)
    check(verdicts)
    assert pool.admission.most_side_by_side == 1
    assert not pool.admission.asks and not pool.admission.granted
