"""Verifier pools of several ranks on one host (train/rl/distributed.py `Ranks.pool_on_my_gpu`) split the
host's memory and cores: each pool's reference store, its workers' memory share and its children's torch
threads are its rank's share; one process alone budgets exactly as before."""

from __future__ import annotations

import os

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.train.rl.distributed import Ranks
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox import shared_blobs
from tritonrl_lib.verify.sandbox.limits import HOST_GPUS_ENV, HOST_POOLS_ENV, host_memory_bytes, memory_share_bytes

CORES = 16
HUGE_MB = 1 << 30  # a reference cache setting larger than any host: the memory share is what caps it


def made_under(ranks: Ranks, workers: int) -> VerifierPool:
    with ranks.pool_on_my_gpu():
        return VerifierPool(VerifyConfig(reference_cache_mb=HUGE_MB), workers=workers, device="cpu", cache=False,
                            progress=False)


@pytest.fixture
def host(monkeypatch):
    monkeypatch.delenv(HOST_POOLS_ENV, raising=False)
    monkeypatch.delenv("TRITONRL_POOL_WORKERS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: CORES)
    total = host_memory_bytes()
    if total is None or not shared_blobs.supported():
        pytest.skip("no /proc/meminfo or no shared memory files: the pool keeps no store here")
    return total


def test_one_process_budgets_the_host_alone(host, monkeypatch):
    pool = made_under(Ranks(), workers=2)
    try:
        assert pool.host_pools == 1
        assert pool._threads == CORES // 2
        assert pool._references.max_bytes == host // 4  # the store: a quarter of the host
        env = pool.worker_env(0)
        assert env[HOST_POOLS_ENV] == "1" and env["TRITONRL_POOL_WORKERS"] == "2"
    finally:
        pool.close()
    assert HOST_POOLS_ENV not in os.environ
    # each worker's share, as its environment says: the quarter split by the pool's workers only
    for k in (HOST_POOLS_ENV, "TRITONRL_POOL_WORKERS"):
        monkeypatch.setenv(k, env[k])
    assert memory_share_bytes() == host // 4 // 2


def test_the_pools_of_four_ranks_on_a_host_each_budget_a_quarter_of_it(host, monkeypatch):
    before_gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    rank = Ranks(world=4, rank=1, local_rank=1, local_world=4, device="cpu")
    pool = made_under(rank, workers=2)
    try:
        assert HOST_POOLS_ENV not in os.environ  # set only while the pool was made
        assert os.environ.get("CUDA_VISIBLE_DEVICES") == before_gpus  # on the CPU no GPU is picked
        assert pool.host_pools == 4
        assert pool._threads == CORES // (2 * 4)
        assert pool._references.max_bytes == host // 4 // 4
        env = pool.worker_env(0)
        assert env[HOST_POOLS_ENV] == "4" and env["TRITONRL_POOL_WORKERS"] == "2"
    finally:
        pool.close()
    # a worker of that pool (its environment) takes its share of its pool's part
    for k in (HOST_POOLS_ENV, "TRITONRL_POOL_WORKERS"):
        monkeypatch.setenv(k, env[k])
    assert memory_share_bytes() == host // 4 // 4 // 2


def test_ranks_on_separate_hosts_each_have_their_host_alone(host):
    pool = made_under(Ranks(world=2, rank=1, local_rank=0, local_world=1, device="cpu"), workers=2)
    try:
        assert pool.host_pools == 1 and pool._threads == CORES // 2
        assert pool._references.max_bytes == host // 4
    finally:
        pool.close()


def test_a_gpu_ranks_pool_is_made_with_its_gpu_and_the_hosts_pool_count(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.delenv(HOST_POOLS_ENV, raising=False)
    with Ranks(world=4, rank=2, local_rank=2, local_world=4, device="cuda").pool_on_my_gpu():
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2" and os.environ[HOST_POOLS_ENV] == "4"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and HOST_POOLS_ENV not in os.environ
    with Ranks(device="cuda").pool_on_my_gpu():  # one process: nothing changes
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and HOST_POOLS_ENV not in os.environ


# ---- jobs that may each have their GPU alone split the host: none budgets the whole of it

HUGE_ELEMENTWISE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_a_pool_on_four_gpus_splits_the_host_between_them(monkeypatch):
    from tritonrl_lib.verify import pool as pool_module

    monkeypatch.delenv(HOST_POOLS_ENV, raising=False)
    monkeypatch.setattr(pool_module, "visible_gpus", lambda: ["0", "1", "2", "3"])
    pool = VerifierPool(VerifyConfig(), workers=8, device="cuda", cache=False, progress=False)
    try:
        assert pool.host_gpus == 4
        assert {pool.worker_env(s)[HOST_GPUS_ENV] for s in range(8)} == {"4"}
        assert "split over 4 GPUs" in pool._budget_desc()  # verdicts judged under another budget are not reused
    finally:
        pool.close()
    monkeypatch.setattr(pool_module, "visible_gpus", lambda: ["0"])
    pool = VerifierPool(VerifyConfig(), workers=2, device="cuda", cache=False, progress=False)
    try:  # one GPU: the whole host, and the budget's description as before
        assert pool.host_gpus == 1 and pool.worker_env(0)[HOST_GPUS_ENV] == "1"
        assert "split" not in pool._budget_desc()
    finally:
        pool.close()
    pool = made_under(Ranks(world=2, rank=0, local_rank=0, local_world=2, device="cpu"), workers=2)
    try:  # on the CPU, the host's pools
        assert pool.host_gpus == 2 and pool.worker_env(0)[HOST_GPUS_ENV] == "2"
    finally:
        pool.close()


def test_a_task_alone_on_one_of_four_gpus_holds_at_most_its_gpus_share_of_the_host(monkeypatch):
    from tritonrl_lib.verify.sandbox import limits
    from tritonrl_lib.verify.settings import JobSettings
    from tritonrl_lib.verify.worker.job import job_budget

    total = 128 << 30
    monkeypatch.setattr(limits, "_memory_total", lambda: total)
    monkeypatch.setenv("TRITONRL_GPU_SHARERS", "12")
    settings = JobSettings.for_device(VerifyConfig(), "cuda")
    job = {"device": "cuda", "task_source": HUGE_ELEMENTWISE}
    out_bytes = 4096 * 393216 * 4
    budgets = {}
    for gpus in (1, 4):
        monkeypatch.setenv(limits.HOST_GPUS_ENV, str(gpus))
        assert limits.host_share_bytes() == total // gpus
        budgets[gpus] = job_budget(job, settings)
    one, four = budgets[1], budgets[4]
    assert one.exclusive and four.exclusive  # 6 GiB outputs: the task takes its GPU alone either way
    # alone on the host's only GPU it may keep 40% of the host in reference outputs; on one of four GPUs
    # (four such tasks at once) no more than its GPU's share, or the two sets it always keeps
    assert one.reference_bytes > limits.HOST_REFERENCE_SHARE * total / 4
    assert four.reference_bytes <= max(limits.HOST_REFERENCE_SHARE * total / 4, 2 * out_bytes)
    assert four.reference_bytes < one.reference_bytes
