"""Scalars as loop bounds under older Triton interpreters with NumPy 2.4 or later, for the CPU verifier.

Inside an interpreted kernel a scalar argument is a one-element array. Triton 3.6's interpreter turns
it into a Python int with `int(array)` (`_patch_lang_tensor`'s `__index__`), which NumPy 2.4 refuses
for arrays of one dimension ("only 0-dimensional arrays can be converted to Python scalars"). So every
kernel whose loop bound is an argument (`for start in range(0, n_cols, BLOCK)`: row loops, a GEMM's K
loop, a convolution's window) failed on the CPU with a runtime error while it compiles and runs on a
GPU. Measured on a GPU host (Triton 3.6.0, NumPy 2.5.2): the data stage, which verifies on the host's
CPU cores, lost 4,953 of 8,050 generated examples this way and every GEMM and convolution family
with them. Triton 3.9 squeezes the array first; this does the same where the interpreter does not.
Installed in a CPU worker before its children fork, and again (a no-op) in each candidate's process.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = [False]


def scalar_index(tensor: Any) -> int:
    """`tensor.__index__` as Triton 3.9 has it: the one value of a scalar's array, whatever its rank."""
    import numpy as np

    return int(np.asarray(tensor.handle.data).squeeze())


def install() -> bool:
    """Patch the interpreter's tensor patching in this process; False where there is nothing to patch
    (no interpreter module, or one whose patching this does not know)."""
    if _INSTALLED[0]:
        return True
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return False

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", scalar_index)  # undone with the rest when the launch ends

    patch_lang_tensor.__wrapped__ = original
    interpreter._patch_lang_tensor = patch_lang_tensor
    _INSTALLED[0] = True
    return True
