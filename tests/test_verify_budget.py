"""Per-job budgets from a task's measured footprint (limits.Budget.for_task), on machines of the
sizes the project runs on: KernelBench's published sizes on one 80 GB GPU and a 128 GiB host."""

from __future__ import annotations

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.sandbox.footprint import Footprint
from tritonrl_lib.verify.sandbox.limits import GIB, Budget
from tritonrl_lib.verify.settings import JobSettings

SETTINGS = JobSettings.for_device(VerifyConfig(), "cuda")
GPU, HOST = 80 * GIB, 128 * GIB


def fp(inputs_gib: float, outputs_gib: float, params_gib: float = 0.0, work_gib: float = 0.0) -> Footprint:
    out = int(outputs_gib * GIB)
    return Footprint(int(inputs_gib * GIB), int(params_gib * GIB), out, int(work_gib * GIB), out)


def test_a_small_task_shares_the_gpu_under_the_configured_limits():
    b = Budget.for_task(fp(0.01, 0.01), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert not b.exclusive and not b.too_large
    assert b.memory_limit_mb == SETTINGS.memory_limit_mb
    assert 0 < b.gpu_fraction <= 0.9 / 4 + 1e-9
    assert b.larger_factor >= 2.0


def test_a_large_task_runs_alone_with_room_for_its_data():
    # L1/39 L2Norm at its published size: 8 GiB in, 8 GiB out
    b = Budget.for_task(fp(8, 8), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert b.exclusive and not b.too_large
    assert b.gpu_fraction > 0.5  # the GPU to itself
    assert b.memory_limit_mb > 16 * 1024  # its outputs travel through the candidate's memory
    assert b.file_size_bytes >= 2 * 8 * GIB
    # the worker may hold only part of the host in references: fewer sets than the seven a small task gets
    assert 2 * 8 * GIB <= b.reference_bytes <= 0.4 * HOST


def test_a_task_that_cannot_fit_says_so_with_its_sizes():
    b = Budget.for_task(fp(60, 40), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert b.too_large and "GiB" in b.too_large and "80.0 GiB" in b.too_large


def test_unknown_footprint_keeps_the_configured_limits():
    b = Budget.for_task(None, SETTINGS, "cuda", GPU, HOST, sharers=2)
    assert not b.exclusive and b.memory_limit_mb == SETTINGS.memory_limit_mb and b.reference_bytes == 0


def test_the_reference_cache_takes_a_task_whose_record_fits_a_quarter_of_it():
    # ReLU at RL's training sizes (KernelBench's 4096 x 8192 float32 with the batch / 4): 32 MiB in,
    # 32 MiB out, about 0.5 GiB over its input sets; the published sizes' 4x that
    training = Budget.for_task(fp(1 / 32, 1 / 32), SETTINGS, "cuda", GPU, HOST, sharers=12)
    published = Budget.for_task(fp(1 / 8, 1 / 8), SETTINGS, "cuda", GPU, HOST, sharers=12)
    assert training.cacheable_inputs and not published.cacheable_inputs
    small_cache = JobSettings.for_device(VerifyConfig(reference_cache_mb=1024), "cuda")
    assert not Budget.for_task(fp(1 / 32, 1 / 32), small_cache, "cuda", GPU, HOST, sharers=12).cacheable_inputs
    off = JobSettings.for_device(VerifyConfig(reference_cache_mb=0), "cuda")
    assert not Budget.for_task(fp(0.001, 0.001), off, "cuda", GPU, HOST, sharers=12).cacheable_inputs
