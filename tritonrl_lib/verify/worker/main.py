"""A verifier worker: the long-lived process (`python -m tritonrl_lib.verify.worker.main`) the pool starts.

It imports torch and triton once, never initialises CUDA and never runs a torch op itself, so
forking it is cheap and every candidate's process starts clean. It takes jobs from the pool's
connection one at a time and answers each with a verdict (job.py); between jobs it adopts reference
records other workers of its GPU made, and gives its spare children up when no job comes for a
while. It is a child subreaper (processes.py), so nothing a candidate starts escapes its tree, and
it dies with the pool (PDEATHSIG), killing every process below it and removing its temp dir.

Everything here runs only in the worker process; the module holds no state (it runs as
`__main__`, and the singletons it uses live in spares.py and job.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import traceback
from typing import Any

from .. import reasons as R
from ..sandbox import messages as M
from ..sandbox.processes import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, kill_tree, prctl
from ..sandbox.spares import SPARE_IDLE_S, SPARES


def _worker_imports(device: str) -> None:
    """Everything a child needs, imported once in the worker so each fork starts warm."""
    import numpy  # noqa: F401
    import torch  # noqa: F401

    if device == "cpu":
        # first a copy of Triton with the interpreter off, set aside for the compile check
        # (compilation/check.py); then the interpreted one the candidates run under
        from ..compilation.check import stash_compiler_triton

        stash_compiler_triton()
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    if device == "cpu":
        import triton.runtime.interpreter  # noqa: F401

        from ..candidate.interpreter_libdevice import install  # warm-up: after the interpreted Triton

        install()  # libdevice's math for the interpreter, once here (each child's own call finds it done)
        from ..candidate import interpreter_compat  # after the interpreted Triton, as libdevice's

        interpreter_compat.install()  # scalar loop bounds under older interpreters (inherited by children)

        # imported lazily by the interpreter's argument specialisation: pay for it once here, not
        # in every child (CPU only: on a GPU nothing that might touch the driver loads here)
        try:
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass
    # warm-up: what every child imports, here once, after the right Triton (the order above matters)
    from ..candidate import main as child, timing  # noqa: F401
    from . import job, judge  # noqa: F401  (warm-up)
    from .. import policy  # noqa: F401  (warm-up)
    from ..sandbox.footprint import warm  # warm-up
    from ..candidate.runtime_checks import dispatch_switch_hooks  # warm-up

    dispatch_switch_hooks()  # wrapped once here; each child names its candidate's file

    warm()  # the meta-device measurement's imports, paid once here (no CUDA), not in every probe

    if device == "cuda":
        from ..compilation.check import warm_gpu_compiler  # warm-up, on a GPU only

        warm_gpu_compiler()  # a failure leaves the children cold: slower, not wrong


def worker_main(fd: int, device: str) -> None:
    from multiprocessing.connection import Connection

    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    conn = Connection(fd)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the pool's process died: so do we, cleaning up (below)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        _worker_imports(device)
        import torch

        if torch.cuda.is_initialized():
            raise RuntimeError("CUDA was initialised in the verifier worker while importing; forked "
                               "candidates could not use the GPU")
    except BaseException:
        conn.send(M.Failed(type=M.FAILED, error=traceback.format_exc()[-4000:]))
        return
    base = tempfile.mkdtemp(prefix="tritonrl-verify-")

    def terminate(signum: int, frame: Any) -> None:  # the pool is gone or wants us gone: leave nothing
        kill_tree(os.getpid(), grace_s=5.0)
        shutil.rmtree(base, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    conn.send(M.Ready(type=M.READY, pid=os.getpid(), base=base))
    from .job import adopt_reference, reference_keys, run_job  # after the imports above, in their order

    idle_s = float(os.environ.get("TRITONRL_SPARE_IDLE_S") or SPARE_IDLE_S)
    try:
        while True:
            try:
                if SPARES.spares and not conn.poll(idle_s):
                    SPARES.drop()  # no job for a while: give the spares and their GPU memory up
                    continue
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if not isinstance(msg, dict) or msg.get("type") == M.STOP:
                break
            if msg.get("type") == M.REFERENCE:  # another worker's reference phase, for the job that follows
                try:
                    adopt_reference(conn, msg)
                except (OSError, ValueError):
                    break  # the pool's end is broken: it notices and replaces this worker
                continue
            if msg.get("type") != M.JOB:
                continue
            job: M.Job = msg["job"]
            try:
                verdict = run_job(job, base, conn, queued=msg.get("queued"))
            except BaseException:
                verdict = {"task_id": job.get("task_id", ""), "stage": "static", "reason": R.INTERNAL_ERROR,
                           "error": traceback.format_exc()[-4000:]}
            try:
                conn.send(M.Result(type=M.RESULT, id=msg["id"], verdict=verdict, spares=SPARES.pids,
                                   ref_keys=reference_keys()))
            except (OSError, ValueError):
                break
    finally:
        kill_tree(os.getpid())
        shutil.rmtree(base, ignore_errors=True)


def _main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="tritonrl verifier worker (started by VerifierPool)")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=("cpu", "cuda"), required=True)
    args = ap.parse_args(argv)
    worker_main(args.fd, args.device)
    # leave without tearing down modules: the compiler's set-aside copy of Triton (compiler_copy.py)
    # would make the extension report its objects as leaked
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1:])
