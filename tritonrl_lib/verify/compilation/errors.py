"""What counts as a compile error: one definition for both devices.

An error Triton raises while turning a launch into a kernel, before the kernel runs: binding and
specialising its arguments, parsing its launch options, generating code (AST -> TTIR, where the
type and shape rules of triton.language live) and, on a GPU or with compile_check=full, lowering,
ptxas and the shared-memory limit. It ends the candidate with reason `compile_error`, stage
"static" (it did not pass compile) and reward 0, whichever input set made the launch (judge.py).
The interpreter raises some of the same rules itself, as `InterpreterError`s from triton/language
(a type or shape rule) or from its `static_assert`; those count too, also with the check off
(compilation/check.py). `classify` (candidate/context.py) asks `compile_failure_kind`.
"""

from __future__ import annotations

import os
import re
from typing import Any

# errors the GPU autotuner swallows while benchmarking a config (it skips that config)
BENCH_TOLERATED = ("CompileTimeAssertionFailure", "OutOfResources", "PTXASError")


class CUDACompileError(RuntimeError):
    """A launch Triton's CUDA compiler rejects (raised on the CPU by the compile check)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind  # the compiler's exception class name (CompilationError, TypeError, ...)


def innermost_frame(tb: Any) -> Any:
    """The frame a traceback ends in (where the error was raised)."""
    frame = None
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
    return frame


def _in_package(filename: str, *parts: str) -> bool:
    return (os.sep + os.path.join("triton", *parts) + os.sep) in filename


def _interpreter_root(exc: BaseException) -> BaseException | None:
    """The error an InterpreterError wraps (through nested ones), or None if exc is not one."""
    try:
        from triton.runtime.errors import InterpreterError
    except ImportError:
        return None
    if not isinstance(exc, InterpreterError):
        return None
    root: BaseException = exc
    for _ in range(20):
        if not isinstance(root, InterpreterError) or root.__cause__ is None:
            break
        root = root.__cause__
    return None if root is exc else root


def interpreter_static_assert(exc: BaseException) -> bool:
    """True when the interpreter raised `exc` for a failed `tl.static_assert`."""
    root = _interpreter_root(exc)
    frame = innermost_frame(root.__traceback__) if root is not None else None
    return frame is not None and frame.f_code.co_name == "_new_static_assert" \
        and _in_package(frame.f_code.co_filename, "runtime")


def _dependency_finder_methods() -> frozenset[str]:
    try:
        from triton.runtime.jit import DependenciesFinder
    except ImportError:
        return frozenset()
    return frozenset(n for n, v in vars(DependenciesFinder).items() if callable(v))


def compile_failure_kind(exc: BaseException) -> str | None:
    """Whether Triton rejected a kernel or a launch before running it.

    "compiler": the compiler or its launch preparation raised (either device, or the CPU's compile
    check). "interpreter": the interpreter raised for a rule the compiler checks too (a
    triton.language type or shape rule, a static_assert), unless the compile check accepted that
    launch. None: anything else (a runtime error, the candidate's own Python).
    """
    if isinstance(exc, CUDACompileError):
        return "compiler"
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources, PTXASError
    except ImportError:
        return None
    if isinstance(exc, (CompilationError, OutOfResources, PTXASError)):
        return "compiler"
    root = _interpreter_root(exc)
    if root is not None:
        if getattr(exc, "tritonrl_compiles", False):
            return None  # the compiler accepted this very launch: an interpreter limitation
        frame = innermost_frame(root.__traceback__)
        if frame is not None and (_in_package(frame.f_code.co_filename, "language")
                                  or interpreter_static_assert(exc)):
            return "interpreter"
        return None
    frame = innermost_frame(exc.__traceback__)
    if frame is None:
        return None
    name, func = frame.f_code.co_filename, frame.f_code.co_name
    if _in_package(name, "language") or _in_package(name, "compiler"):
        return "compiler"
    if re.search(r"[\\/]triton[\\/]backends[\\/][^\\/]+[\\/]compiler\.py$", name):
        return "compiler"  # option parsing and the lowering passes
    if name.endswith(os.path.join("triton", "runtime", "jit.py")) and (
            func in ("_pack_args", "create_binder", "_do_compile") or func in _dependency_finder_methods()):
        # a launch keyword the kernel does not have; or, while hashing the kernel before its first
        # compile, a call to a plain Python function ("Unsupported function referenced")
        return "compiler"
    if name == "<string>" and func == "dynamic_func":
        return "compiler"  # Triton's argument binder: an argument it cannot bind or specialise
    return None


def interpreter_only(exc: BaseException) -> bool:
    """An interpreter error for a compiler rule, raised by a launch the compiler accepted."""
    if not getattr(exc, "tritonrl_compiles", False):
        return False
    try:
        exc.tritonrl_compiles = False  # type: ignore[attr-defined]
        return compile_failure_kind(exc) == "interpreter"
    finally:
        exc.tritonrl_compiles = True  # type: ignore[attr-defined]


def mark_compiled(exc: BaseException) -> None:
    """Record on an interpreter error that the compiler accepted the launch that raised it."""
    if _interpreter_root(exc) is not None:
        try:
            exc.tritonrl_compiles = True  # type: ignore[attr-defined]
        except AttributeError:
            pass
