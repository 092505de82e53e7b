"""What a candidate may use: time, memory, processes, file size, bytes sent, its share of the GPU.

A job's `Budget` follows its task's measured footprint (footprint.py) and the machine: the GPU memory
its process may take (a worker's share of the GPU; when the task is too big for one, `exclusive`, as many
shares as it needs, `shares`, the GPU's other jobs then holding no more than the rest; all of them, the GPU
alone, where fewer would leave input sets out for the host's memory), the host memory and file size it
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

from ..candidate.timing import MIN_FLUSH_BYTES
from ..candidate.variations import VARIATION_ORDER

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
# the caching allocator's blocks are not packed: a tenth more than the tensors held, and at least one block
# of the task's largest tensor's size (a small tensor carved out of a freed large block pins all of it)
FRAGMENTATION = 0.1
REUSE_MAX_BYTES = 1 << 30  # input sets this small go into the previous set's tensors (same addresses)
TIMED_CHECKS = 3  # timed trials whose output is checked, besides the last, at random (candidate_phase.py)
TIMED_KEEP_BYTES = 2 << 30  # kept outputs of timed trials on the device: past this, only the last is checked


@dataclass(frozen=True)
class Budget:
    """What one job may use, from its task's footprint and the machine (see the module's docstring)."""

    gpu_fraction: float  # of the GPU's memory, for set_per_process_memory_fraction (0 on the CPU)
    exclusive: bool  # the task needs more than a worker's share: `shares` of its GPU (or the host, on the CPU)
    memory_limit_mb: int  # resident memory of the candidate's processes together
    file_size_bytes: int
    transfer_bytes: int  # everything the candidate's process may send the worker
    larger_factor: float  # the other-size set's batch factor (< 1: a smaller size)
    reference_s: float  # the reference phase's own wall-clock budget
    cacheable_inputs: bool  # small enough for the worker's reference cache to keep the inputs
    reference_bytes: int = 0  # host memory the worker may fill with reference outputs (0: no limit)
    too_large: str = ""  # not "" when the task cannot run on this machine at all: why, with the sizes
    note: str = ""
    skip_sets: tuple[str, ...] = ()  # input sets left out up front: with them the task would not fit
    timed_checks: int = TIMED_CHECKS + 1  # the timed calls whose outputs are checked (fresh sets of their own)
    need_bytes: int = 0  # the device memory the job's peak needs (memory_need), for people
    larger_growth: float = 0.0  # how much larger the other-size set's tensors are (0: larger_factor)
    shares: int = 1  # the worker shares of its GPU the job holds (its own; more when exclusive, all: alone)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Budget | None:
        if not data:
            return None
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        if "skip_sets" in values:
            values["skip_sets"] = tuple(str(x) for x in values["skip_sets"] or ())
        return cls(**values)

    @classmethod
    def for_task(cls, fp: Footprint | None, settings: JobSettings, device: str, gpu_bytes: int | None,
                 host_bytes: int | None, sharers: int) -> Budget:
        """The budget of a task of footprint `fp` (None: unknown; the configured limits then) on a
        device of `gpu_bytes` memory shared by `sharers` workers, on a host of `host_bytes`.

        The device memory a job needs is `memory_need`'s: the peak over the reference phase, every input
        set of the candidate phase and the timing, with what each set's draw really holds. It runs in its
        share of the GPU where it fits, alone on the GPU where only that fits, and with optional sets made
        smaller or left out (the larger set, the timed checks, the dtype, offset and seed sets, in that
        order, each said in a note) where not even that does; `too_large` where the original set alone
        does not fit."""
        mem_mb = int(settings.memory_limit_mb)
        base_fraction = GPU_MEMORY_FRACTION / max(1, sharers) if device == "cuda" else 0.0
        if fp is None:
            return cls(base_fraction, False, mem_mb, FILE_SIZE_LIMIT, max(GIB, 4 * (mem_mb << 20)), 2.0,
                       float(settings.timeout_s), True, note="the task's footprint is unknown: configured limits")
        peak = fp.peak_bytes
        host = host_bytes or (64 * GIB)
        wanted = VARIATION_ORDER[: max(1, int(settings.num_variations))]
        timing = bool(settings.timing_enabled) and device == "cuda"
        if device == "cuda":
            total = gpu_bytes or (80 * GIB)
            share = GPU_MEMORY_FRACTION * total / max(1, sharers)
            alone = GPU_MEMORY_FRACTION * total
            if 1.1 * peak + CONTEXT_BYTES > alone:
                return cls._too_large(fp, settings, f"its original input set needs about {_gib(peak)} of GPU "
                                      f"memory ({_sizes(fp)}); this GPU has {_gib(total)}, of which a "
                                      f"candidate may use {_gib(alone)}")
            plan = _fit(fp, wanted, timing, share - CONTEXT_BYTES, alone - CONTEXT_BYTES, sharers, cuda=True)
            if plan is None:
                need = memory_need(fp, _minimal(wanted), 0.5, 1, timing, cuda=True) + CONTEXT_BYTES
                return cls._too_large(fp, settings, f"even with its optional input sets left out it needs about "
                                      f"{_gib(need)} of GPU memory ({_sizes(fp)}); this GPU has {_gib(total)}, "
                                      f"of which a candidate may use {_gib(alone)}")
            exclusive, factor, skip, checks, need = plan
            shares = _shares(fp, need, share, sharers, host, factor, [n for n in wanted if n not in skip], checks) \
                if exclusive else 1
            room = alone if shares >= sharers else share * shares
            fraction = room / total
        else:
            room = 0.5 * host
            if 2 * peak + HOST_BASE_BYTES > room:
                return cls._too_large(fp, settings, f"its original input set needs about {_gib(peak)} of memory "
                                      f"({_sizes(fp)}); this machine has {_gib(host)}")
            per_worker = host / (4 * max(1, sharers))
            plan = _fit(fp, wanted, False, per_worker, room - HOST_BASE_BYTES, sharers, cuda=False)
            if plan is None:
                return cls._too_large(fp, settings, f"its input sets need more memory than this machine's "
                                      f"{_gib(host)} ({_sizes(fp)})")
            exclusive, factor, skip, checks, need = plan
            shares = max(1, sharers) if exclusive else 1  # on the CPU a large task has the host to itself
            fraction = 0.0
        biggest_out = fp.output_bytes * fp.grown(factor)
        # on a GPU the host holds outputs on their way to the worker, and both models' weights, which
        # a task's __init__ makes on the host before they move (a 4 GiB nn.Linear, twice)
        data = 2.5 * biggest_out + 2 * fp.param_bytes if device == "cuda" else \
            max(3 * peak * fp.grown(factor), need)
        # the configured limit holds a task's small data; a task whose data is large gets room for it
        memory_mb = mem_mb if data <= SMALL_DATA_BYTES else max(mem_mb, int(HOST_BASE_BYTES + data) >> 20)
        # every input set's inputs and outputs once through the reference phase (and the timed checks')
        moved = (fp.input_bytes + fp.output_bytes) * (5 + fp.grown(factor) + checks)
        # the worker holds every set's reference outputs (host memory files) while the candidate runs:
        # past what the host can give this job, later input sets are left out (never the original and
        # range), with a note, rather than the machine killing the worker
        ref_bytes = _reference_room(fp, host, shares, sharers, biggest_out)
        notes = [] if fp.complete else [fp.note]
        if skip or factor < min(LARGER_FACTORS):
            left = ", ".join(skip) if skip else ""
            notes.append(f"the task's input sets would not fit {'this GPU' if device == 'cuda' else 'this host'} "
                         f"all at once ({_gib(need)} needed with {left or 'nothing'} left out): "
                         + (f"{left} left out, " if left else "") + f"other size x{factor:g}, "
                         f"{checks} timed call(s) checked")
        return cls(fraction, exclusive, memory_mb,
                   reference_bytes=ref_bytes, shares=shares,
                   file_size_bytes=max(FILE_SIZE_LIMIT, int(2 * biggest_out) + (64 << 20)),
                   transfer_bytes=max(GIB, 4 * (memory_mb << 20),
                                      int(3 * fp.output_bytes * (6 + fp.grown(factor) + checks))),
                   larger_factor=factor,
                   reference_s=float(settings.timeout_s) + REFERENCE_S_PER_GIB * moved / GIB,
                   cacheable_inputs=cacheable(moved, settings),
                   note="; ".join(notes), skip_sets=tuple(skip), timed_checks=checks, need_bytes=int(need),
                   larger_growth=fp.grown(factor))

    @classmethod
    def _too_large(cls, fp: Footprint, settings: JobSettings, why: str) -> Budget:
        return cls(0.0, True, int(settings.memory_limit_mb), FILE_SIZE_LIMIT, GIB, 1.0, float(settings.timeout_s),
                   False, too_large=f"the task does not fit this machine: {why}")


def _reference_room(fp: Footprint, host: float, shares: int, sharers: int, biggest_out: float) -> int:
    """The host memory a job of `shares` of its GPU's `sharers` shares may fill with reference outputs: its
    part of HOST_REFERENCE_SHARE of the host (all of it alone), less the outputs on their way, at least two
    sets' (the original and range sets are never left out)."""
    room = HOST_REFERENCE_SHARE * host * min(shares, max(1, sharers)) / max(1, sharers)
    return max(int(room - 2 * biggest_out), 2 * fp.output_bytes)


def _shares(fp: Footprint, need: float, share: float, sharers: int, host: float, factor: float,
            sets: list[str], checks: int) -> int:
    """How many worker shares of its GPU a job too large for one holds: enough for its device memory
    (`need`, with the CUDA context), and for its reference outputs in host memory, so it runs every
    input set it would run alone; all of them (the GPU alone) where fewer cannot promise that. The pool
    runs jobs of a GPU together while their shares add up to at most its workers (pool._grant_alone):
    on an H100 at 12 workers with a 128 GiB host, a Level-2 convolution needing 14 GB takes 3 shares,
    four at once, where taking the GPU alone ran them one at a time."""
    sharers = max(1, sharers)
    biggest_out = fp.output_bytes * fp.grown(factor)
    # every set's reference outputs held at once: the other size grown, the timed checks', the tiny set's (at
    # the task's own sizes where no constant shrinks), the dtype set's float32 alternative beside its own,
    # and all of it twice (a half-precision task sends each set's float32-accumulated alternative too;
    # reference_phase.py): an overestimate only costs concurrency, an underestimate would leave sets out
    held = 2 * (fp.output_bytes * (len(sets) + checks + 1 + ("dtype" in sets)) + biggest_out)
    if held > _reference_room(fp, host, sharers, sharers, biggest_out):
        return sharers  # alone it leaves sets out for the host's sake: the same sets, so alone
    for k in range(max(2, -(-int(need + CONTEXT_BYTES) // max(1, int(share)))), sharers):
        if _reference_room(fp, host, k, sharers, biggest_out) >= held:
            return k
    return sharers


# optional input sets, left out in this order where the task would not fit the device with them
DROPPABLE = ("dtype", "offset", "seed")


def _minimal(wanted: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in wanted if n not in DROPPABLE and n != "larger")


def _fit(fp: Footprint, wanted: tuple[str, ...], timing: bool, share: float, alone: float, sharers: int,
         cuda: bool) -> tuple[bool, float, list[str], int, int] | None:
    """(exclusive, larger factor, sets left out, timed checks, bytes needed): every set at the largest other
    size in the worker's share, else alone; then smaller other sizes, fewer timed checks and optional sets
    left out until it fits alone. None when not even the original and range sets fit."""
    checks_full = TIMED_CHECKS + 1 if timing and fp.output_bytes * (TIMED_CHECKS + 1) <= TIMED_KEEP_BYTES else \
        (1 if timing else 0)
    factors = (*LARGER_FACTORS, *SMALLER_FACTORS)
    tries: list[tuple[float, list[str], int]] = [(f, [], checks_full) for f in factors]
    dropped: list[str] = []
    for name in ("larger", *DROPPABLE):
        if name in wanted:
            dropped = [*dropped, name]
            tries.append((min(SMALLER_FACTORS), list(dropped), 1 if timing else 0))
    for exclusive_ok in (False, True):
        room = alone if exclusive_ok else share
        for factor, skip, checks in tries:
            if skip and not exclusive_ok:
                continue  # in a share every set runs (the other size smaller if need be); else alone
            sets = tuple(n for n in wanted if n not in skip)
            need = memory_need(fp, sets, factor, checks, timing, cuda)
            if need <= room:
                return exclusive_ok and sharers > 1, factor, skip, checks, need
    return None


def memory_need(fp: Footprint, sets: tuple[str, ...], factor: float, checks: int, timing: bool,
                cuda: bool = True) -> int:
    """The device memory (the host's on the CPU) a job of this task holds at its peak, over the reference
    phase, the candidate phase's input sets and the timing, each counted with what it really holds at
    once (CUDA's context not included):

    - the models: the reference (P) and, after the dtype set, its half-precision copy (kept, the candidate
      phase does not need it: dropped there); while that set's float32 reference runs, a float32 copy of
      the half model too; the candidate's models built from them, with HEADROOM for what a solution keeps
      beside its weights (a transposed copy);
    - a set's draw (Footprint.draw_peak: get_inputs and the set's transform, its copies and temporaries);
    - the reference phase: the inputs, the reference's outputs and intermediates, and for a half set its
      inputs drawn again, widened to float32, with the float32 reference's outputs (for a task of float32
      GEMMs or convolutions, its TF32 run's outputs beside its own: tf32.py); at its start the
      original set drawn twice at once (the repeatability check) and two runs' outputs kept;
    - the candidate phase: the last set's inputs where they are refilled in place (small sets only), the
      inputs, the candidate's outputs and intermediates with HEADROOM, then the inputs drawn again beside
      the ones it was given (the inputs-unchanged check);
    - the timing: the reference's inputs, the candidate's output held over to the next call, the kept
      copies of checked calls' outputs, the L2 flush buffer, and the largest of one call's own: the
      reference's output and intermediates, the candidate's fresh inputs with its output and
      intermediates, a fresh draw (the last call's inputs are dropped right after it)."""
    I, O, W, P = fp.input_bytes, fp.output_bytes, fp.work_bytes, fp.param_bytes
    H = fp.half_params
    with_dtype = "dtype" in sets
    held = I if I <= REUSE_MAX_BYTES else 0
    models_ref = P + (H if with_dtype else 0)
    tiny_models = P / 8  # shrunk constructor sizes: every shrunk dimension at least 8 times smaller
    models_cand = HEADROOM * (P + (H if with_dtype else 0)) + 2 * tiny_models
    scale = {"larger": fp.grown(factor), "dtype": 0.5}

    def sized(name: str) -> float:
        return scale.get(name, 1.0)

    names = ("tiny", *sets, *(f"timed:{k}" for k in range(checks)))
    peaks = [
        # the reference phase's start: the original drawn twice, two runs' outputs kept
        P + 2 * fp.drawn,
        P + I + 2 * O + W,
        # the dtype set's model made (a float32 copy cast down) and its float32 reference (a float32 copy)
        2 * P + H if with_dtype else 0,
    ]
    for name in names:
        k = sized(name)
        draw = fp.draw_peak(name, factor)
        ref_run = k * (I + O + W)
        if fp.heavy_float32 and name != "dtype":
            ref_run += k * O  # TF32's error: the reference's outputs with TF32 operands beside its own
        if name == "dtype":
            # the half outputs kept, the inputs drawn again and widened, the float32 model and its outputs
            ref_run = 0.5 * O + max(draw, I / 2 + fp.floats + P + 1.5 * O + W) + H
        peaks.append(models_ref + max(draw, ref_run))
        if not name.startswith("timed"):
            own = k * I + HEADROOM * k * (O + W)
            peaks.append(P + models_cand + held + max(draw, own, k * I + draw))
    if timing:
        # copies of checked calls' outputs (the last one is kept as it is: the output held over)
        kept = max(0, checks - 1) * O
        # the reference's inputs, the candidate's output held over to the next call, and then one of: the
        # reference's call (its output, intermediates), the candidate's (its fresh inputs, output and
        # intermediates; the held one freed), the next fresh draw (the last call's inputs dropped first)
        calls = max(O + W, I + HEADROOM * W, fp.drawn)
        peaks.append(P + models_cand + I + O + calls + kept + MIN_FLUSH_BYTES)
    largest = fp.largest_block * (fp.grown(factor) if "larger" in sets else 1.0)
    return int(max(peaks) + max(FRAGMENTATION * max(peaks), largest))


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


HOST_POOLS_ENV = "TRITONRL_HOST_POOLS"  # verifier pools sharing the host: one per rank (Ranks.pool_on_my_gpu)


HOST_GPUS_ENV = "TRITONRL_HOST_GPUS"  # the host's GPUs (CPU pools) whose jobs may each run alone at once


def host_share_bytes() -> int | None:
    """The host memory the jobs of one GPU budget (Budget.for_task's `host_bytes`): the host's, split
    between the GPUs whose jobs may each have their GPU alone at the same time (HOST_GPUS_ENV, set by the
    pool: its GPUs times the host's pools; on the CPU, the host's pools). A task alone on its GPU may hold
    HOST_REFERENCE_SHARE of this in reference outputs, so two such tasks on two GPUs of one host never
    promise more than the host has; a pool on one GPU budgets the whole host, as before."""
    total = _memory_total()
    if total is None:
        return None
    return total // max(1, int(os.environ.get(HOST_GPUS_ENV) or 1))


def host_pools() -> int:
    """How many verifier pools share this host (HOST_POOLS_ENV: a multi-GPU run's ranks each make one;
    the pool reads it when made and passes it to its workers); 1 for a pool alone."""
    return max(1, int(os.environ.get(HOST_POOLS_ENV) or 1))


def memory_share_bytes(workers: int | None = None, pools: int | None = None) -> int | None:
    """This worker's share of a quarter of the machine's memory: the pools sharing the host split it
    (`pools`, default host_pools()), each pool's workers split its part (default TRITONRL_POOL_WORKERS)."""
    total = _memory_total()
    if total is None:
        return None
    if workers is None:
        workers = int(os.environ.get("TRITONRL_POOL_WORKERS") or 1)
    if pools is None:
        pools = host_pools()
    return total // 4 // max(1, pools) // max(1, workers)


def gpu_sharers() -> int:
    """How many workers share this worker's GPU (TRITONRL_GPU_SHARERS, set by the pool)."""
    return max(1, int(os.environ.get("TRITONRL_GPU_SHARERS", "1")))


def gpu_memory_fraction() -> float:
    """The share of the GPU's memory one candidate's process may allocate by default: the workers of
    one GPU split GPU_MEMORY_FRACTION of it (a job's Budget may give more: an exclusive task)."""
    return GPU_MEMORY_FRACTION / gpu_sharers()


def host_memory_bytes() -> int | None:
    return _memory_total()
