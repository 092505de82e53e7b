"""The compiler's copy of Triton, beside the interpreted one a CPU worker's candidates run under.

`@triton.jit` decides interpreted or compiled when a function is decorated, and triton.language
decorates its own helpers (tl.sum, tl.cdiv, ...) at import, so a Triton imported under the
interpreter cannot compile. A CPU worker therefore imports Triton's Python modules twice at start:
first with the interpreter off, warmed by one compile of our own kernel and set aside
(`set_aside`), then with it on for the candidates. The set-aside copy is never seen by the
interpreter (it patches only the triton.language its kernels' globals name); `compiler_triton()`
swaps it into `sys.modules` for the duration of a compile (launch_compiler.py). The compiled
extension (triton._C) is loaded once and shared by both copies.
"""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager
from types import ModuleType
from typing import Callable, Iterator

from ...core.env import env_set

_COMPILER_TRITON: dict[str, ModuleType] | None = None
_STASH_ERROR: str | None = None


def _is_triton_python(name: str) -> bool:
    # the compiled extension (triton._C) is loaded once and shared by both copies
    return (name == "triton" or name.startswith("triton.")) and not (name == "triton._C"
                                                                      or name.startswith("triton._C."))


def compiler_available() -> tuple[bool, str]:
    return _COMPILER_TRITON is not None, _STASH_ERROR or ""


def set_aside(warm: Callable[[], None]) -> None:
    """In a CPU worker, before anything imports Triton: import it with the interpreter off (`warm`
    does, compiling a kernel of ours with it) and set those modules aside. The caller then imports
    Triton again, interpreted, for the candidates."""
    global _COMPILER_TRITON, _STASH_ERROR
    if any(_is_triton_python(m) for m in sys.modules):
        _STASH_ERROR = "Triton was imported before the compiler's copy could be set aside"
        return
    modules: dict[str, ModuleType] = {}
    with env_set("TRITON_INTERPRET", "0"):
        try:
            warm()
        except Exception:
            _STASH_ERROR = "the CUDA frontend does not run here:\n" + traceback.format_exc()[-1500:]
        finally:
            modules = {k: m for k, m in sys.modules.items() if _is_triton_python(k)}
            for k in modules:
                del sys.modules[k]
    if _STASH_ERROR is None:
        _COMPILER_TRITON = modules


@contextmanager
def compiler_triton() -> Iterator[None]:
    """Make the compiler's copy of Triton the one `import triton` finds, and the interpreter off,
    for the duration of the block; then put everything back."""
    if _COMPILER_TRITON is None:
        raise RuntimeError(_STASH_ERROR or "the worker did not set the compiler's Triton aside")
    current = {k: m for k, m in sys.modules.items() if _is_triton_python(k)}
    for k in current:
        del sys.modules[k]
    sys.modules.update(_COMPILER_TRITON)
    with env_set("TRITON_INTERPRET", "0"):
        try:
            yield
        finally:
            for k in [k for k in sys.modules if _is_triton_python(k)]:
                module = sys.modules.pop(k)
                if k not in _COMPILER_TRITON:
                    _COMPILER_TRITON[k] = module  # imported lazily by the compiler: keep it with its copy
            sys.modules.update(current)
