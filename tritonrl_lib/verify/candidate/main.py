"""What runs inside a candidate's process: reference first, then the candidate, stage by stage.

Order matters for trust. Everything the verdict compares against is produced BEFORE the
candidate's module is imported: the reference phase (reference_phase.py) executes the task
module, builds the inputs of every input set, runs the reference on clones of them and sends its
outputs to the worker at once. Only then (`ref_done`) is the candidate imported and run, stage by
stage (candidate_phase.py). `child_main` is the entry point the sandbox calls in a freshly forked
child, or a spare child (spares.py) once it is handed its job; `warm_child` is what a spare does
while it waits.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Callable

import torch

from ..sandbox.gpu_lock import GpuLock
from ..sandbox import messages as M
from ..sandbox.protocol import ChildChannel
from .candidate_phase import CandidatePhase
from .context import Child
from .reference_phase import TASK_MODULE, ReferencePhase


WARMED: dict[str, float] = {}  # in a spare: when its warm-up started and ended (for TRITONRL_TRACE)


def warm_child(device: str, job_waiting: Callable[[], bool] = lambda: False) -> None:
    """What every child on this device does before anything of its job, done by a spare while it
    waits for one (spares.Spare): on a GPU, create the CUDA context (as `Child.setup` does, outside
    the GPU lock) and the cuBLAS and cuDNN handles (their GPU work under the shared lock, like a
    candidate's). Nothing of it is a candidate's or a reference's: the memory it used holds ones.
    The handles are made at first use anyway, so once a job waits (`job_waiting()`) they are left
    to it: most tasks need neither, and making them can wait on the GPU lock behind a timer."""
    WARMED["spare_forked"] = time.monotonic()
    if device != "cuda":
        return
    torch.cuda.set_device(0)
    torch.cuda.init()
    torch.cuda.mem_get_info()  # the context exists from here on
    WARMED["spare_context"] = time.monotonic()
    if job_waiting():
        return
    lock = GpuLock(os.environ["TRITONRL_GPU_LOCK"]) if os.environ.get("TRITONRL_GPU_LOCK") else None
    try:
        with lock.shared() if lock is not None else contextlib.nullcontext(), torch.no_grad():
            x = torch.ones(64, 64, device="cuda")
            y = x @ x
            z = torch.nn.functional.conv2d(torch.ones(1, 4, 8, 8, device="cuda"), torch.ones(4, 4, 3, 3, device="cuda"))
            torch.cuda.synchronize()
            del x, y, z
        WARMED["spare_warm"] = time.monotonic()
    finally:
        if lock is not None:
            lock.close()


def child_main(job: M.Job, ch: ChildChannel) -> None:
    """Entry point of a candidate's process (called by the sandbox after fork). With
    TRITONRL_PROFILE_DIR set (a diagnostic: benchmarks/verifier_profile.py --cprofile), the whole
    of it runs under cProfile, saved there as child-<pid>.prof."""
    folder = os.environ.get("TRITONRL_PROFILE_DIR")
    if not folder:
        return _child_main(job, ch)
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.runcall(_child_main, job, ch)
    finally:
        prof.dump_stats(os.path.join(folder, f"child-{os.getpid()}.prof"))


def _child_main(job: M.Job, ch: ChildChannel) -> None:
    child = Child(job, ch)
    for label, t in WARMED.items():
        child.mark(label, t)
    child.setup()
    child.mark("setup")
    ch.send({"type": M.SETUP_DONE})  # the worker's reference-phase clock starts here (limits.py)
    with torch.no_grad():
        with child.gpu_section():
            plan = ReferencePhase(child).run()
        if plan is None:
            return
        forget_reference(plan, child, keep_for_timing=child.timing_wanted())
        ch.send({"type": M.REF_DONE})
        CandidatePhase(child, plan).run()


def forget_reference(plan: Any, child: Any, keep_for_timing: bool) -> None:
    """Before the candidate's module is imported, nothing of the reference it could use stays within
    reach: the task's modules leave sys.modules (their files are gone already), every reference model
    but the one the timing runs is dropped, and the task's source leaves the job (the guard refuses the
    routes to what stays: frames and the garbage collector)."""
    for name in [m for m in sys.modules if m.startswith(TASK_MODULE)]:
        module = sys.modules.pop(name, None)
        for attr, value in list(vars(module).items()) if module is not None else ():
            if isinstance(value, type) and issubclass(value, torch.nn.Module):
                delattr(module, attr)  # get_inputs stays usable (the sets draw with it), the Model does not
    for key, spec in plan.models.items():
        if not (keep_for_timing and key == "base"):
            spec.ref = None
    child.job = {k: v for k, v in child.job.items() if k != "task_source"}
    child.source = ""
    import gc

    gc.collect()
