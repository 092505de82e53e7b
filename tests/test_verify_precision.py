"""Which precision a solution computes in (verify/precision.py): read from the Triton kernels its forward
launches and what they call, as the static check finds them, never from code that does not run there; the
pool's static check computes it once and the job carries it to the judge and the child."""

from __future__ import annotations

import textwrap

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.precision import IEEE, TF32
from tritonrl_lib.verify.settings import JobSettings
from tritonrl_lib.verify.static import candidate_precision, static_check
from tritonrl_lib.verify.worker.judge import Judge

HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

ADD_KERNEL = """
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

DOT_KERNEL = """
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b{extra}))
"""

# forward keeps the GEMM in PyTorch and launches only the elementwise kernel
GEMM_IN_TORCH = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        y = {gemm}
        out = torch.empty_like(y)
        add_kernel[(1,)](y, y, out, y.numel(), BLOCK=256)
        return out
"""

LAUNCH_DOT = """
class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        {kernel}[(1,)](a, b, c, BLOCK=16)
        return c
"""


def module(*parts: str) -> str:
    return textwrap.dedent("\n".join(parts))


def both(code: str) -> str:
    """The precision as the pool's static check finds it, checked equal to candidate_precision's."""
    found = static_check(code, "fusion").precision
    assert candidate_precision(code) == found
    return found


def test_a_launched_dot_at_triton_default_is_tf32_and_ieee_where_it_says_so():
    assert both(module(HEAD, DOT_KERNEL.format(extra=""), LAUNCH_DOT.format(kernel="dot_kernel"))) == TF32
    ieee = module(HEAD, DOT_KERNEL.format(extra=', input_precision="ieee"'), LAUNCH_DOT.format(kernel="dot_kernel"))
    assert both(ieee) == IEEE
    no_tf32 = module(HEAD, DOT_KERNEL.format(extra=", allow_tf32=False"), LAUNCH_DOT.format(kernel="dot_kernel"))
    assert both(no_tf32) == IEEE
    assert both(module(HEAD, ADD_KERNEL, GEMM_IN_TORCH.format(gemm="x @ self.w"))) == ""


def test_a_dot_kernel_never_launched_does_not_loosen_the_gemm_kept_in_pytorch():
    code = module(HEAD, ADD_KERNEL, DOT_KERNEL.format(extra=""), GEMM_IN_TORCH.format(gemm="x @ self.w"))
    assert both(code) == ""
    # nor one that only a function forward never calls launches
    dead_launcher = code + textwrap.dedent("""
        def unused(a, b, c):
            dot_kernel[(1,)](a, b, c, BLOCK=16)
        """)
    assert both(dead_launcher) == ""


def test_a_matmul_in_a_torch_jit_script_function_is_no_triton_kernel():
    code = module(HEAD, ADD_KERNEL, """
@torch.jit.script
def project(x, w):
    return x @ w
""", GEMM_IN_TORCH.format(gemm="project(x, self.w)"))
    assert both(code) == ""


def test_a_kernel_made_by_calling_triton_jit_computes_its_matmul_in_tf32():
    code = module(HEAD, """
def matmul_body(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], a @ b)

mm_kernel = triton.jit(matmul_body)
""", LAUNCH_DOT.format(kernel="mm_kernel"))
    assert both(code) == TF32


@pytest.mark.parametrize("imports, dot", [
    ("import triton.language as language", "language.dot"),
    ("from triton.language import dot as d", "d"),
    ("from triton import language as lang", "lang.dot"),
])
def test_aliased_dots_in_a_launched_kernel_are_tf32(imports, dot):
    kernel = DOT_KERNEL.format(extra="").replace("tl.dot", dot)
    assert both(module(HEAD, imports, kernel, LAUNCH_DOT.format(kernel="dot_kernel"))) == TF32


def test_a_dot_in_what_a_launched_kernel_calls_counts():
    helper_jit = module(HEAD, """
@triton.jit
def tile_product(a, b):
    return tl.dot(a, b)

@triton.jit
def outer_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tile_product(a, a))
""", LAUNCH_DOT.format(kernel="outer_kernel"))
    assert both(helper_jit) == TF32
    # Triton runs a plain function a kernel calls on its tensors: its `@` is tl.dot
    plain = helper_jit.replace("@triton.jit\ndef tile_product(a, b):\n    return tl.dot(a, b)",
                               "def tile_product(a, b):\n    return a @ b")
    assert "return a @ b" in plain
    assert both(plain) == TF32


def test_the_pool_carries_the_static_checks_precision_to_the_judge():
    launched = module(HEAD, DOT_KERNEL.format(extra=""), LAUNCH_DOT.format(kernel="dot_kernel"))
    dead = module(HEAD, ADD_KERNEL, DOT_KERNEL.format(extra=""), GEMM_IN_TORCH.format(gemm="x @ self.w"))
    task = Task(id="t", level=2, name="t", source="import torch\nclass Model(torch.nn.Module):\n    pass\n")
    pool = VerifierPool(VerifyConfig(), workers=1, device="cpu", cache=False, progress=False)
    try:
        for code, want in ((launched, TF32), (dead, "")):
            for static in (True, False):
                verdict, job = pool._prepare(task, f"```python\n{code}\n```", pool.config, static)
                assert verdict is None and job.get("precision", "unread") == (want if static else "unread")
                assert Judge(job).dot_precision == want  # without the static check the judge reads the code
    finally:
        pool.close()
    # the judge takes the job's precision as the pool found it, and reads the code only without one
    settings = JobSettings.for_device(VerifyConfig(), "cpu").to_json()
    job = {"code": launched, "settings": settings, "policy": "fusion"}
    assert Judge(job).dot_precision == TF32
    assert Judge({**job, "precision": ""}).dot_precision == ""
