"""What a candidate may use: time, memory, processes, file size, bytes sent, its share of the GPU.

A job's `Budget` follows its task's measured footprint (footprint.py) and the machine: the GPU memory
its process may take (a share of the GPU, or the whole of it when the task is too big to share:
`exclusive`, the pool then runs nothing else on that GPU meanwhile), the host memory and file size it
needs for its outputs, how much larger the other-size input set may be, how long the reference phase
may take, and whether the task fits the machine at all (`too_large`, said up front with the sizes).

The limits of one job (`Limits`) are enforced in two places: the worker watches the candidate's
whole process tree (sandbox/run.py: the set-up, reference-phase and candidate clocks, resident memory
summed over every descendant, process count, bytes sent) and the kernel enforces rlimits inside the
candidate's process (`set_rlimits`: no core dumps, a file-size cap, an address-space cap on the CPU
only, where CUDA's huge virtual reservations do not exist). The candidate's own clock is the CPU time
of its processes from the end of the reference phase: waiting (for the GPU lock, behind other
candidates, for a cold machine) does not count, only work; a wall-clock backstop catches a process that
sleeps or blocks.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .footprint import Footprint
    from ..settings import JobSettings

MAX_PROCESSES = 16  # a candidate's tree (the child included) may not hold more live processes
FILE_SIZE_LIMIT = 1 << 30  # RLIMIT_FSIZE of a candidate's process, at least
GPU_MEMORY_FRACTION = 0.9  # of the GPU's memory, split between the workers that share it
GIB = 1 << 30
HEADROOM = 1.5  # a candidate may hold this much more than the reference did on an input set
CONTEXT_BYTES = 1 * GIB  # a CUDA context, Triton's and cuBLAS's workspaces
HOST_BASE_BYTES = 3 * GIB  # a candidate's process before any of its task's data (torch, Triton, CUDA)
HOST_REFERENCE_SHARE = 0.4  # of the host's memory, for one job's reference outputs held by its worker
SMALL_DATA_BYTES = 256 << 20  # task data the configured memory limit is expected to hold as it is
SETUP_S = 180.0  # a process's own set-up (CUDA context on a busy, cold machine)
REFERENCE_S_PER_GIB = 4.0  # the reference phase's budget grows with the bytes its input sets move
WALL_FACTOR = 4.0  # the wall-clock backstop: this many times the candidate's CPU-time budget
RECORD_SHARE_OF_CACHE = 0.25  # the largest reference record a worker's cache takes, of its size
LARGER_FACTORS = (2.0, 1.5)  # the other-size set's batch, largest that fits; else a smaller size:
SMALLER_FACTORS = (0.75, 0.5)


@dataclass(frozen=True)
class Budget:
    """What one job may use, from its task's footprint and the machine (see the module's docstring)."""

    gpu_fraction: float  # of the GPU's memory, for set_per_process_memory_fraction (0 on the CPU)
    exclusive: bool  # the task runs alone on its GPU (or host, on the CPU)
    memory_limit_mb: int  # resident memory of the candidate's processes together
    file_size_bytes: int
    transfer_bytes: int  # everything the candidate's process may send the worker
    larger_factor: float  # the other-size set's batch factor (< 1: a smaller size)
    reference_s: float  # the reference phase's own wall-clock budget
    cacheable_inputs: bool  # small enough for the worker's reference cache to keep the inputs
    reference_bytes: int = 0  # host memory the worker may fill with reference outputs (0: no limit)
    too_large: str = ""  # not "" when the task cannot run on this machine at all: why, with the sizes
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Budget | None:
        if not data:
            return None
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    @classmethod
    def for_task(cls, fp: Footprint | None, settings: JobSettings, device: str, gpu_bytes: int | None,
                 host_bytes: int | None, sharers: int) -> Budget:
        """The budget of a task of footprint `fp` (None: unknown; the configured limits then) on a
        device of `gpu_bytes` memory shared by `sharers` workers, on a host of `host_bytes`."""
        mem_mb = int(settings.memory_limit_mb)
        base_fraction = GPU_MEMORY_FRACTION / max(1, sharers) if device == "cuda" else 0.0
        if fp is None:
            return cls(base_fraction, False, mem_mb, FILE_SIZE_LIMIT, max(GIB, 4 * (mem_mb << 20)), 2.0,
                       float(settings.timeout_s), True, note="the task's footprint is unknown: configured limits")
        peak = fp.peak_bytes
        host = host_bytes or (64 * GIB)
        if device == "cuda":
            total = gpu_bytes or (80 * GIB)
            share = GPU_MEMORY_FRACTION * total / max(1, sharers)
            alone = GPU_MEMORY_FRACTION * total
            # an input set is drawn beside the last one's inputs while it is made (range, offset, dtype)
            # and timing holds the reference's and the candidate's inputs, a refill copy and outputs at once
            timing = 3 * fp.input_bytes + 3 * fp.output_bytes + fp.param_bytes + fp.work_bytes
            need = max(HEADROOM * peak + fp.input_bytes, timing) + CONTEXT_BYTES
            exclusive = sharers > 1 and need > share
            room = alone if exclusive else share
            if 1.1 * peak + CONTEXT_BYTES > alone:
                return cls._too_large(fp, settings, f"its original input set needs about {_gib(peak)} of GPU "
                                      f"memory ({_sizes(fp)}); this GPU has {_gib(total)}, of which a "
                                      f"candidate may use {_gib(alone)}")
            fraction = room / total
        else:
            room = 0.5 * host
            exclusive = sharers > 1 and 3 * peak > host / (4 * max(1, sharers))
            if 2 * peak + HOST_BASE_BYTES > room:
                return cls._too_large(fp, settings, f"its original input set needs about {_gib(peak)} of memory "
                                      f"({_sizes(fp)}); this machine has {_gib(host)}")
            fraction = 0.0
        usable = room - CONTEXT_BYTES if device == "cuda" else room - HOST_BASE_BYTES
        factor = next((f for f in LARGER_FACTORS if HEADROOM * peak * f <= usable),
                      next((f for f in SMALLER_FACTORS if HEADROOM * peak * f <= usable), 0.5))
        biggest_out = fp.output_bytes * max(1.0, factor)
        # on a GPU the host holds outputs on their way to the worker, and both models' weights, which
        # a task's __init__ makes on the host before they move (a 4 GiB nn.Linear, twice)
        data = 2.5 * biggest_out + 2 * fp.param_bytes if device == "cuda" else 3 * peak * max(1.0, factor)
        # the configured limit holds a task's small data; a task whose data is large gets room for it
        memory_mb = mem_mb if data <= SMALL_DATA_BYTES else max(mem_mb, int(HOST_BASE_BYTES + data) >> 20)
        # every input set's inputs and outputs once through the reference phase: six full-size sets at most
        moved = (fp.input_bytes + fp.output_bytes) * (5 + max(1.0, factor))
        # the worker holds every set's reference outputs (host memory files) while the candidate runs:
        # past what the host can give this job, later input sets are left out (never the original and
        # range), with a note, rather than the machine killing the worker
        host_room = HOST_REFERENCE_SHARE * host / (1 if exclusive else max(1, sharers))
        ref_bytes = max(int(host_room - 2 * biggest_out), 2 * fp.output_bytes)
        return cls(fraction, exclusive, memory_mb,
                   reference_bytes=ref_bytes,
                   file_size_bytes=max(FILE_SIZE_LIMIT, int(2 * biggest_out) + (64 << 20)),
                   transfer_bytes=max(GIB, 4 * (memory_mb << 20), int(3 * fp.output_bytes * (6 + factor))),
                   larger_factor=factor,
                   reference_s=float(settings.timeout_s) + REFERENCE_S_PER_GIB * moved / GIB,
                   cacheable_inputs=cacheable(moved, settings),
                   note="" if fp.complete else fp.note)

    @classmethod
    def _too_large(cls, fp: Footprint, settings: JobSettings, why: str) -> Budget:
        return cls(0.0, True, int(settings.memory_limit_mb), FILE_SIZE_LIMIT, GIB, 1.0, float(settings.timeout_s),
                   False, too_large=f"the task does not fit this machine: {why}")


def reference_cache_bytes(max_mb: int) -> int:
    """The size of this worker's reference cache: `verify.reference_cache_mb`, capped at its share of
    the machine's memory (memory_share_bytes); 0 disables it."""
    share = memory_share_bytes()
    return min(max(0, int(max_mb)) << 20, share if share is not None else 1 << 62)


def cacheable(record_bytes: float, settings: JobSettings) -> bool:
    """Whether the worker's reference cache keeps a task's record of about `record_bytes` (every input
    set's inputs and reference outputs): at most a quarter of the cache, so it holds four such tasks
    at least."""
    return record_bytes <= reference_cache_bytes(settings.reference_cache_mb) * RECORD_SHARE_OF_CACHE


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _sizes(fp: Footprint) -> str:
    return (f"inputs {_gib(fp.input_bytes)}, parameters {_gib(fp.param_bytes)}, outputs {_gib(fp.output_bytes)}, "
            f"intermediates {_gib(fp.work_bytes)}")


@dataclass
class Limits:
    timeout_s: float  # the candidate's own work: CPU time of its processes after the reference phase
    memory_limit_mb: int  # RSS summed over the candidate's tree; 0 = none
    cap_address_space: bool  # RLIMIT_AS (CPU only)
    max_processes: int = MAX_PROCESSES
    max_transfer_bytes: int = 64 << 30
    file_size_bytes: int = FILE_SIZE_LIMIT
    setup_s: float = SETUP_S  # wall clock until the process is set up (its CUDA context)
    reference_s: float = 0.0  # wall clock of the reference phase (0: timeout_s)
    wall_factor: float = WALL_FACTOR

    @classmethod
    def for_job(cls, settings: JobSettings, device: str, budget: Budget | None = None) -> Limits:
        """A job's limits: its settings' and its budget's, an address-space cap on the CPU."""
        timeout = float(settings.timeout_s)
        if budget is None:
            mem = int(settings.memory_limit_mb)
            return cls(timeout_s=timeout, memory_limit_mb=mem, cap_address_space=device == "cpu",
                       max_transfer_bytes=max(GIB, 4 * (mem << 20)), reference_s=timeout)
        return cls(timeout_s=timeout, memory_limit_mb=budget.memory_limit_mb, cap_address_space=device == "cpu",
                   max_transfer_bytes=budget.transfer_bytes, file_size_bytes=budget.file_size_bytes,
                   reference_s=budget.reference_s)

    @property
    def longest_s(self) -> float:
        """The longest a job can take under these limits (for the pool's own watchdog)."""
        return self.setup_s + self.reference_s * 2 + self.timeout_s * self.wall_factor


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
    cap(resource.RLIMIT_FSIZE, max(FILE_SIZE_LIMIT, int(limits.file_size_bytes)))
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


def gpu_sharers() -> int:
    """How many workers share this worker's GPU (TRITONRL_GPU_SHARERS, set by the pool)."""
    return max(1, int(os.environ.get("TRITONRL_GPU_SHARERS", "1")))


def gpu_memory_fraction() -> float:
    """The share of the GPU's memory one candidate's process may allocate by default: the workers of
    one GPU split GPU_MEMORY_FRACTION of it (a job's Budget may give more: an exclusive task)."""
    return GPU_MEMORY_FRACTION / gpu_sharers()


def host_memory_bytes() -> int | None:
    return _memory_total()
