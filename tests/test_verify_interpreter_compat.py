"""Scalar loop bounds under an interpreter that converts scalars the way Triton 3.6 does.

Triton 3.6's interpreter gives a scalar argument `__index__ = int(array)`, which NumPy 2.4 refuses for its
one-element arrays, so `for start in range(0, n_cols, BLOCK)` failed on the CPU verifier (on a GPU host's
Triton 3.6 this lost every GEMM, convolution and row-loop family of the corpus). These run a real
interpreted kernel in a fresh process with the interpreter's tensor patching replaced by 3.6's own
code, without and with `interpreter_compat.install()`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SCRIPT = textwrap.dedent('''
    import sys
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    newer = interpreter._patch_lang_tensor

    def as_in_triton_3_6(tensor, scope):  # 3.6's __index__, the rest as this Triton has it
        newer(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

    interpreter._patch_lang_tensor = as_in_triton_3_6
    if sys.argv[1] == "compat":
        from tritonrl_lib.verify.candidate import interpreter_compat
        assert interpreter_compat.install()

    @triton.jit
    def row_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):  # the loop bound is an argument
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))

    x = torch.randn(3, 37)
    out = torch.empty(3)
    try:
        row_sum[(3,)](x, out, 37, BLOCK=8)
    except Exception as e:
        print("FAILED", repr(e)[:300])
        sys.exit(0)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)
    print("OK")
''')


def _run(mode: str) -> str:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=300, check=False,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4),
                    reason="NumPy before 2.4 still converts one-element arrays")
def test_triton_3_6_scalar_conversion_fails_a_loop_bound_without_the_patch():
    out = _run("plain")
    assert out.startswith("FAILED") and "0-dimensional" in out, out


def test_loop_over_an_argument_runs_with_the_patch():
    assert _run("compat") == "OK"


def test_install_is_idempotent_and_keeps_the_original_reachable():
    from triton.runtime import interpreter

    from tritonrl_lib.verify.candidate import interpreter_compat

    before, was = interpreter._patch_lang_tensor, interpreter_compat._INSTALLED[0]
    interpreter_compat._INSTALLED[0] = False
    try:
        assert interpreter_compat.install() and interpreter_compat.install()
        patched = interpreter._patch_lang_tensor
        assert getattr(patched, "__wrapped__", None) is not None
        assert interpreter_compat.install() and interpreter._patch_lang_tensor is patched  # not wrapped twice
    finally:
        interpreter._patch_lang_tensor = before
        interpreter_compat._INSTALLED[0] = was
