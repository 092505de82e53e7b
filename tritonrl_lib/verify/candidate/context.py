"""The candidate's process as both of its phases see it: its channel, device, GPU lock and notes.

`Child` holds what the reference phase (reference_phase.py) and the candidate phase
(candidate_phase.py) share: the channel to the worker (protocol.py), the device and, on a GPU, the
lock its workers share it by (gpu_lock.py: held shared while this process may have work on the
GPU, given up for CPU-only work), notes and trace marks for the worker, seeded builds of a model
class, and output encoding. `classify` turns an exception of the candidate's code into one of the
reasons the child may report (reasons.CHILD_REASONS); `excerpt` keeps its traceback from the
candidate's own first frame on.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Any

import torch

from .. import reasons as R
from ..compilation import native_builds
from ..compilation.errors import compile_failure_kind
from ..sandbox import messages as M
from ..sandbox import shared_blobs
from ..sandbox.gpu_lock import GpuLock
from ..sandbox.limits import Budget, gpu_memory_fraction
from ..sandbox.protocol import ChildChannel
from ..settings import JobSettings
from .encoding import blanks_for, encode_outputs
from .input_sets import seed_torch

SEED = 42  # every model, the reference's and the candidate's, is built under it; inputs drawn from it
CANDIDATE_MODULE = "tritonrl_candidate"
ERROR_CHARS = 3000


def classify(exc: BaseException, stage: str) -> str:
    """A machine reason for an exception raised by candidate code during `stage`."""
    msg = f"{type(exc).__name__}: {exc}"
    low = msg.lower()
    if isinstance(exc, SystemExit):
        return R.EXIT_CALLED
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())) \
            or "out of memory" in low or "can't allocate memory" in low or "cannot allocate memory" in low:
        return R.OUT_OF_MEMORY
    accel = getattr(torch, "AcceleratorError", None)
    if (accel is not None and isinstance(exc, accel)) or "cuda error" in low or "illegal memory access" in low \
            or "device-side assert" in low or "cudaerror" in low:
        return R.CUDA_ERROR
    # Triton rejected a kernel or a launch before running it (the same rule on both devices; the
    # interpreter's version of a compiler rule counts too): see compilation/errors.py
    if compile_failure_kind(exc) is not None:
        return R.COMPILE_ERROR
    return R.COMPILE_ERROR if stage == "compile" else R.RUNTIME_ERROR


def excerpt(exc: BaseException) -> str:
    """The traceback from the candidate's first frame on (the harness frames above it say nothing)."""
    tb = exc.__traceback__
    walk = tb
    while walk is not None and not walk.tb_frame.f_code.co_filename.endswith(CANDIDATE_MODULE + ".py"):
        walk = walk.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, walk or tb))
    return text[-ERROR_CHARS:]


class Child:
    """One candidate's process: its job (settings rebuilt from the job's JSON), channel and device."""

    def __init__(self, job: M.Job, ch: ChildChannel):
        self.job = job
        self.ch = ch
        self.settings = JobSettings.from_json(job["settings"])
        self.device = "cuda" if job["device"] == "cuda" else "cpu"
        self.workdir = os.getcwd()
        self.source = job["task_source"]
        self.budget = Budget.from_json(job.get("budget"))  # from the task's footprint (limits.py), if known
        self.gpu_lock: GpuLock | None = None
        self.tracing = bool(os.environ.get("TRITONRL_TRACE"))  # a diagnostic: see mark()
        # the tiny set alone, before the task's full sizes (worker/job.py): it can only reject
        self.prescreen = bool(job.get("prescreen"))

    def timing_wanted(self) -> bool:
        """Whether this job times the candidate (on a GPU, with timing on; never in a prescreen)."""
        return bool(self.settings.timing_enabled) and self.device == "cuda" and not self.prescreen

    # ---------------------------------------------------------------- setup

    def setup(self) -> None:
        self.gpu_lock = None
        if self.device == "cuda":
            torch.cuda.set_device(0)
            fraction = self.budget.gpu_fraction if self.budget is not None and self.budget.gpu_fraction > 0 \
                else gpu_memory_fraction()
            torch.cuda.set_per_process_memory_fraction(min(fraction, 0.95))
            if os.environ.get("TRITONRL_GPU_LOCK"):
                self.gpu_lock = GpuLock(os.environ["TRITONRL_GPU_LOCK"])
            # Triton's C helper modules come built from the worker, not compiled again here
            native_builds.install(self.ch.request, self.note, around=self.off_gpu)
        # this candidate's share of the host's cores on either device: torch's default (every core) let each of
        # a GPU host's 48 candidates spin 16 threads on its CPU-side copies, and the CPU time that cost was
        # charged to the candidate (honest KernelBench solutions ended `timeout` with 12 workers per GPU)
        torch.set_num_threads(max(1, int(self.job.get("threads", 1))))

    def gpu_section(self) -> Any:
        """Hold the GPU shared while this process may have work on it (gpu_lock.py)."""
        return self.gpu_lock.shared() if self.gpu_lock else contextlib.nullcontext()

    @contextlib.contextmanager
    def off_gpu(self) -> Any:
        """CPU-only work inside a GPU section (drawing inputs on the CPU, copying them for the worker):
        the shared hold is given up meanwhile, after a device-wide sync, so a timer elsewhere waits
        for GPU work in flight and not for this (gpu_lock.py)."""
        if self.gpu_lock is None or self.gpu_lock.held != "shared":
            yield
            return
        torch.cuda.synchronize()
        with self.gpu_lock.released():
            yield

    def release_gpu_while_compiling(self) -> None:
        """A kernel compile is CPU work: give the shared hold up meanwhile, after a device-wide sync,
        so a timer elsewhere need not wait for it."""
        from triton.runtime.jit import JITFunction

        original = getattr(JITFunction, "_do_compile", None)
        if original is None or self.gpu_lock is None:
            return

        def _do_compile(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.off_gpu():
                return original(fn_self, *args, **kwargs)

        JITFunction._do_compile = _do_compile

    def note(self, text: str) -> None:
        self.ch.send({"type": M.NOTE, "text": text})

    def mark(self, label: str, t: float | None = None) -> None:
        """With TRITONRL_TRACE set (benchmarks/verifier.py --trace): tell the worker when this point
        was reached (`t`, else now) and how long this process has waited for the GPU lock so far."""
        if self.tracing:
            used = os.times()  # this process's CPU time, and that of the children it waited for
            self.ch.send({"type": M.MARK, "label": label, "t": time.monotonic() if t is None else t,
                          "lock_wait": self.gpu_lock.waited_s if self.gpu_lock else 0.0,
                          "cpu": used.user + used.system + used.children_user + used.children_system})

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def build(self, cls: type, init_inputs: list[Any]) -> torch.nn.Module:
        seed_torch(SEED)
        return cls(*init_inputs)

    def encode(self, outs: list[Any], blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None
               ) -> tuple[list[dict[str, Any]], list[Any]]:
        """encode_outputs, large outputs sealed straight from the device where the channel passes memfds."""
        return encode_outputs(outs, seal=self.ch.blob_sock is not None, blanks=blanks)

    def blanks(self, specs: list[tuple[tuple[int, ...], torch.dtype]]) -> dict[int, list[shared_blobs.BlankBlob]]:
        """blanks_for these output specs where outputs travel as memfds, made off the GPU lock."""
        if self.ch.blob_sock is None or self.device != "cuda":
            return {}
        with self.off_gpu():
            return blanks_for(specs)
