"""What the Triton interpreter lacks and a GPU has, on the CPU verifier: libdevice's math is filled in
(honest kernels that call libdevice.tanh / pow / isnan pass, through either module path), and inline
PTX, which nothing on the CPU can run, is scored as a runtime error with a note saying why."""

from __future__ import annotations


import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.pool import VerifierPool

from verifier_fixtures import candidate, task

GELU = task("gelu_tanh")


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as p:
        yield p


@pytest.mark.parametrize("module", ["triton.language.extra", "triton.language.extra.cuda"])
def test_libdevice_math_runs_under_the_interpreter(pool, module):
    """Through either module path a solution may import libdevice from (the CUDA backend's, or the
    generic one the compiler links to it)."""
    code = candidate("gelu_tanh_libdevice_ok").replace("from triton.language.extra import libdevice",
                                                       f"from {module} import libdevice")
    assert f"from {module} import libdevice" in code
    v = pool.verify(GELU, code)
    assert v.correct and v.cheat_flags == [], (v.reason, v.error[:400])


def test_a_wrong_libdevice_kernel_still_fails(pool):
    wrong = candidate("gelu_tanh_libdevice_ok").replace("libdevice.tanh(inner)", "libdevice.tanh(inner * 2.0)")
    v = pool.verify(GELU, wrong)
    assert not v.correct and v.reason.startswith("mismatch:"), (v.reason, v.error[:300])


def test_inline_ptx_is_a_runtime_error_on_the_cpu_with_a_note(pool):
    v = pool.verify(GELU, candidate("gelu_tanh_inline_asm"))
    assert (v.correct, v.reason) == (False, "runtime_error"), (v.reason, v.error[:300])
    assert any("inline_asm_elementwise" in n and "a GPU runs it" in n for n in v.notes), v.notes
