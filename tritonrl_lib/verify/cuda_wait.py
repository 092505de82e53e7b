"""How a candidate's process waits for the GPU: blocked in the kernel, not spinning on a core.

The CUDA driver's default (`auto`) spins while a process waits on the GPU whenever the host has
more cores than the process has contexts, which is always true of a verifier child: a dozen
children each waiting on a synchronize then hold a dozen cores at 100% doing nothing, while the
next candidates' Triton compiles (CPU work) queue behind them. `block` sets the primary context's
CU_CTX_SCHED_BLOCKING_SYNC before torch creates it, so waiting costs no CPU. What a verdict
measures is unchanged: timing is CUDA events, GPU time (timing.py); a blocked wait only wakes a
few microseconds later.

The pool passes verify.cuda_wait to its workers as TRITONRL_CUDA_WAIT; children apply it.
"""

from __future__ import annotations

import ctypes
import os

MODES = ("block", "spin", "auto")
_FLAGS = {"auto": 0x0, "spin": 0x1, "block": 0x4}  # CU_CTX_SCHED_AUTO / _SPIN / _BLOCKING_SYNC
ENV = "TRITONRL_CUDA_WAIT"


def apply_from_env() -> str:
    """Set this process's primary-context wait mode from TRITONRL_CUDA_WAIT, before its CUDA context
    exists. Returns what happened ("block", "auto (unset)", "skipped: ..."); never raises: a driver
    that refuses leaves the default, which is slower, not wrong."""
    mode = os.environ.get(ENV, "").strip()
    if not mode or mode == "auto":
        return "auto (driver default)"
    if mode not in _FLAGS:
        return f"skipped: {ENV}={mode!r} is not one of {', '.join(MODES)}"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"skipped: no CUDA driver ({e})"
    if cuda.cuInit(0) != 0:
        return "skipped: cuInit failed"
    dev = ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return "skipped: no device 0"
    flags, active = ctypes.c_uint(), ctypes.c_int()
    get_state = getattr(cuda, "cuDevicePrimaryCtxGetState", None)
    if get_state is not None and get_state(dev, ctypes.byref(flags), ctypes.byref(active)) == 0 and active.value:
        return "skipped: the CUDA context already exists"
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or getattr(cuda, "cuDevicePrimaryCtxSetFlags")
    rc = set_flags(dev, ctypes.c_uint(_FLAGS[mode]))
    return mode if rc == 0 else f"skipped: cuDevicePrimaryCtxSetFlags returned {rc}"
