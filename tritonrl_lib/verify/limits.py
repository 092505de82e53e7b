"""What a candidate may use: time, memory, processes, file size, bytes sent, its share of the GPU.

The limits of one job (`Limits`) are enforced in two places: the worker watches the candidate's
whole process tree (sandbox.py: timeout, resident memory summed over every descendant, process
count, bytes sent) and the kernel enforces rlimits inside the candidate's process (`set_rlimits`:
no core dumps, a file-size cap, an address-space cap on the CPU only, where CUDA's huge virtual
reservations do not exist). The shares of the machine that several workers split (memory for
their reference caches, the GPU's memory) are computed here too.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .settings import JobSettings

MAX_PROCESSES = 16  # a candidate's tree (the child included) may not hold more live processes
FILE_SIZE_LIMIT = 1 << 30  # RLIMIT_FSIZE of a candidate's process
GPU_MEMORY_FRACTION = 0.9  # of the GPU's memory, split between the workers that share it


@dataclass
class Limits:
    timeout_s: float
    memory_limit_mb: int  # RSS summed over the candidate's tree; 0 = none
    cap_address_space: bool  # RLIMIT_AS (CPU only)
    max_processes: int = MAX_PROCESSES
    max_transfer_bytes: int = 64 << 30

    @classmethod
    def for_job(cls, settings: JobSettings, device: str) -> Limits:
        """A job's limits: its settings', an address-space cap on the CPU, and at most four times
        its memory limit (1 GiB at least) sent to the worker."""
        return cls(timeout_s=float(settings.timeout_s), memory_limit_mb=int(settings.memory_limit_mb),
                   cap_address_space=device == "cpu",
                   max_transfer_bytes=max(1 << 30, 4 * (int(settings.memory_limit_mb) << 20)))


def set_rlimits(limits: Limits) -> None:
    """In the candidate's process, before any of its code: the limits the kernel enforces."""
    try:
        import resource
    except ImportError:
        return

    def cap(which: int, value: int) -> None:
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT)
    if limits.cap_address_space and limits.memory_limit_mb:
        cap(resource.RLIMIT_AS, _vm_size_bytes() + (limits.memory_limit_mb << 20))


def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@functools.cache
def _memory_total() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def memory_share_bytes(workers: int | None = None) -> int | None:
    """This worker's share of a quarter of the machine's memory (the pool's workers split it)."""
    total = _memory_total()
    if total is None:
        return None
    if workers is None:
        workers = int(os.environ.get("TRITONRL_POOL_WORKERS") or 1)
    return total // 4 // max(1, workers)


def gpu_memory_fraction() -> float:
    """The share of the GPU's memory one candidate's process may allocate: the workers of one GPU
    (TRITONRL_GPU_SHARERS, set by the pool) split GPU_MEMORY_FRACTION of it."""
    sharers = max(1, int(os.environ.get("TRITONRL_GPU_SHARERS", "1")))
    return GPU_MEMORY_FRACTION / sharers
