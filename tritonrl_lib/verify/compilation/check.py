"""The compile check: on the CPU, each kernel launch is also compiled for CUDA, at its first
occurrence, before the interpreter runs it, so a kernel the compiler rejects fails here exactly as
it would on a GPU.

Why. On a GPU, Triton compiles each kernel at its first launch; code the compiler rejects ends the
candidate with `compile_error`. On the CPU kernels run under the interpreter (TRITON_INTERPRET=1),
which runs the same Python but checks far less: it accepts `break`, lambdas, f-strings, dicts and
list comprehensions, calls to plain Python functions and non-constexpr globals inside a kernel, a
loop-carried variable that changes type, `if` on a whole tensor, a non-power-of-2 `num_warps`, an
unknown launch keyword, a numpy integer as a kernel argument, ... A verdict must not depend on the
device, so the CPU path compiles what it runs.

The parts: what counts as a compile error, one definition for both devices
(compilation/errors.py); the compiler's copy of Triton a CPU worker sets aside beside the interpreted
one (compiler_copy.py); compiling one launch the way `JITFunction.run` does on a GPU, in the
candidate's process (launch_compiler.py). Here: warming those compilers in the worker, so that
every forked child starts warm.

Exact GPU behaviour that follows from compiling at the launch: an autotune config that fails with
a static_assert, OutOfResources or a ptxas error while being benchmarked is skipped, as the GPU
autotuner skips it (`interpreter_autotune`); a launch the compiler accepts but the interpreter then
rejects for one of its compile rules is the interpreter's limitation, scored as a runtime error
with a note. A launch the check cannot rebuild (a kernel created inside a function, an argument of
another Triton copy's type) is left to the interpreter, with a note: never a failure.

Setting: `verify.compile_check` = auto (frontend on the CPU; nothing on a GPU, whose real compile is
the check) | frontend | full | off, resolved for the device in settings.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

from ...core.env import env_set
from .compiler_copy import compiler_available, compiler_triton, set_aside
from .launch_compiler import LaunchCompiler
from ..candidate.variations import load_module_file

_FULL_WARMED = False

# touches the helpers kernels use most, so their one-time setup happens once per worker
_WARM_SOURCE = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _helper(x):
    return tl.maximum(x, 0.0)


@triton.jit
def warm_kernel(x_ptr, out_ptr, idx_ptr, n, stride, BLOCK: tl.constexpr, K: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0)
    y = tl.where(x > 0, x, -x) + tl.abs(x) + tl.sqrt(tl.abs(x)) + tl.rsqrt(tl.abs(x) + 1.0)
    y += tl.exp(x) + tl.log(tl.abs(x) + 1.0) + tl.sigmoid(x) + libdevice.tanh(x) + libdevice.erf(x)
    y += tl.minimum(x, 1.0) + _helper(x) + tl.cumsum(x, 0) + tl.softmax(x)
    s = tl.sum(x, axis=0) + tl.max(x, axis=0) + tl.min(x, axis=0)
    i = tl.argmax(x, axis=0) + tl.argmin(x, axis=0)
    acc = tl.zeros((K, K), dtype=tl.float32)
    rk = tl.arange(0, K)
    for k in range(0, tl.cdiv(n, K)):
        a = tl.load(x_ptr + rk[:, None] * K + rk[None, :] + k)
        acc += tl.dot(a, a)
    tl.store(out_ptr + offs, (y + s).to(tl.float16).to(tl.float32), mask=mask)
    tl.store(out_ptr + rk[:, None] * K + rk[None, :], acc)
    tl.store(idx_ptr + pid, i)
    tl.atomic_add(out_ptr, s)
'''


def stash_compiler_triton() -> None:
    """In a CPU worker, before anything imports Triton: the compiler's copy of Triton set aside
    (compiler_copy.py), its CUDA frontend warmed by one compile of our own kernel."""
    set_aside(lambda: _warm("frontend"))


def _warm(mode: str) -> None:
    """Compile a small kernel of ours (never a candidate's) so that forked children start warm."""
    with tempfile.TemporaryDirectory(prefix="tritonrl-warm-") as wd, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Triton's one-time notices belong to no candidate
        path = os.path.join(wd, "tritonrl_warm_kernel.py")
        with open(path, "w") as f:
            f.write(_WARM_SOURCE)
        with env_set("TRITON_CACHE_DIR", os.path.join(wd, "cache")):
            try:
                import torch

                module = load_module_file(path, "tritonrl_warm_kernel")
                compiler = LaunchCompiler(mode, path)
                x, idx = torch.zeros(64), torch.zeros(4, dtype=torch.int32)
                compiler.compile_launch(module.warm_kernel, (x, x, idx, 17, 1), {"BLOCK": 128, "K": 16})
            finally:
                sys.modules.pop("tritonrl_warm_kernel", None)


def warm_gpu_compiler() -> str | None:
    """In a GPU worker, before its first fork: pay Triton's once-per-process costs of a compile here,
    so every child inherits them instead of paying them itself: the hash of Triton's own library
    that every cache key includes (it reads all of libtriton, ~500 MB: 0.4 s on a CPU core), the
    ptxas version, LLVM's set-up. Our own kernel, compiled for sm_90 without any driver call, so
    CUDA stays uninitialised here. None, or why it did not work (a cold child is slower, not wrong)."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
        _warm("full")
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"
    return None


def warm_full_pipeline() -> None:
    """Once per worker, before its first `full` check: run the whole pipeline (LLVM, ptxas) on our
    own kernel here, so forked children start warm."""
    global _FULL_WARMED
    if _FULL_WARMED or not compiler_available()[0]:
        return
    _FULL_WARMED = True
    try:
        with compiler_triton():
            _warm("full")
    except Exception:
        pass  # a cold child is slower, not wrong
