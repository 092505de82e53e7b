"""Static stage (issue 3, point 2) and the policy table behind it.

Real Triton solutions must pass; each cheat and failure is a realistic candidate that must get
the right reason and flag. Policy op names are collected from real ops under a
TorchDispatchMode, not typed by hand. Nothing here runs a candidate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tritonrl_lib.verify import policy as pol
from tritonrl_lib.verify.static import StaticReport, import_verdict, static_check

CASES = Path(__file__).parent / "extract_cases"
ADD = (CASES / "vector_add_relu.py").read_text()
SOFTMAX = (CASES / "softmax.py").read_text()
MATMUL = (CASES / "matmul_autotuned.py").read_text()
CONV = (CASES / "conv_relu_bias_fusion.py").read_text()
LINEAR = (CASES / "linear_gelu_fusion.py").read_text()

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []
'''

HEADER = '''import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x + y, 0.0), mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_relu_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out

'''


def model(forward_body: str, init_body: str = "        super().__init__()\n", extra: str = "") -> str:
    """A candidate: the shared kernel and launcher, then ModelNew with the given bodies."""
    return (HEADER + extra + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n" + init_body
            + "\n    def forward(self, x, y):\n" + forward_body)


def check(code: str, policy: str = "strict", **kw) -> StaticReport:
    return static_check(code, policy, **kw)


def assert_ok(report: StaticReport) -> None:
    assert report.ok, report.detail
    assert report.reason == "ok" and report.flags == []


def assert_flag(report: StaticReport, reason: str, flag: str, line_text: str | None = None,
                code: str | None = None) -> None:
    assert not report.ok
    assert flag in report.flags, (report.flags, report.detail)
    assert any(f.flag == flag and f.reason == reason for f in report.findings), report.detail
    if line_text is not None and code is not None:
        want = next(i for i, ln in enumerate(code.split("\n"), 1) if line_text in ln)
        assert any(f.flag == flag and f.line == want for f in report.findings), (want, report.detail)
        assert f"line {want}:" in report.detail


# --------------------------------------------------------------------------- real solutions pass


@pytest.mark.parametrize("code,kernels", [
    (ADD, ["add_relu_kernel"]),
    (SOFTMAX, ["softmax_kernel"]),
    (MATMUL, ["matmul_kernel"]),
    (LINEAR, ["_gelu", "linear_gelu_kernel"]),
], ids=["elementwise", "reduction_launcher", "autotuned_matmul", "gemm_gelu_weights_in_nn_linear"])
@pytest.mark.parametrize("policy", ["strict", "fusion"])
def test_real_solutions_pass(code, kernels, policy):
    r = check(code, policy)
    assert_ok(r)
    assert r.kernels == kernels
    assert r.launched and set(r.launched) <= set(kernels)


def test_fusion_solution_keeping_conv2d():
    assert_ok(check(CONV, "fusion"))
    strict = check(CONV, "strict")
    assert_flag(strict, "static:pytorch_compute", "pytorch_compute:torch.nn.Conv2d",
                "x = self.conv(x)", CONV)


def test_legitimate_launcher_idioms_raise_nothing():
    code = '''import math
from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.runtime import driver


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@triton.jit
def scale_shift_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = offs % C
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x * tl.load(w_ptr + c, mask=mask) + tl.load(b_ptr + c, mask=mask)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _num_sms() -> int:
    props = driver.active.utils.get_device_properties(torch.cuda.current_device())
    return props["multiprocessor_count"]


def scale_shift(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None):
    assert x.is_contiguous() and x.dim() == 2, "expects a contiguous 2-D input"
    n = x.numel()
    if out is None:
        out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    scale_shift_kernel[grid](x, w, b, out, n, x.shape[1])
    return out


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features) / math.sqrt(features))
        self.register_buffer("bias", torch.zeros(features))
        self.eps = eps
        self.block = triton.next_power_of_2(features)
        self.w_t = self.weight.detach().t().contiguous().sum()  # __init__ may compute freely

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous().to(torch.float32)
        rows = []
        for start in range(0, x2.shape[0], 1 << 20):
            chunk = x2[start:start + (1 << 20)]
            rows.append(chunk.size(0))
        with torch.no_grad():
            out = scale_shift(x2, self.weight, self.bias)
        assert out.stride(-1) == 1
        return out.view(shape).to(x.dtype)


if __name__ == "__main__":
    m = ModelNew(64)
    x = torch.randn(8, 64)
    print(torch.allclose(m(x), x * m.weight + m.bias, atol=1e-5))
'''
    assert_ok(check(code))


@pytest.mark.parametrize("imports,decorator,lang", [
    ("import triton as tr\nimport triton.language as lang", "@tr.jit", "lang"),
    ("from triton import jit\nimport triton\nimport triton.language as tl", "@jit", "tl"),
    ("import triton\nfrom triton import language as tl", "@triton.jit()", "tl"),
])
def test_kernel_found_under_any_alias(imports, decorator, lang):
    code = f'''import torch
import torch.nn as nn
{imports}


{decorator}
def neg_kernel(x_ptr, o_ptr, n, BLOCK: {lang}.constexpr):
    offs = {lang}.program_id(0) * BLOCK + {lang}.arange(0, BLOCK)
    {lang}.store(o_ptr + offs, -{lang}.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        neg_kernel[(x.numel() + 255) // 256,](x, out, x.numel(), BLOCK=256)
        return out
'''
    r = check(code)
    assert_ok(r)
    assert r.kernels == ["neg_kernel"] and r.launched == ["neg_kernel"]


def test_kernel_reached_through_autograd_function_and_helper_module():
    code = HEADER + '''
class _AddReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        out = launch(x, y)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (out > 0), grad * (out > 0)


class TritonAddReLU(nn.Module):
    def forward(self, x, y):
        return _AddReLU.apply(x, y)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = TritonAddReLU()

    def forward(self, x, y):
        return self.op(x, y)
'''
    r = check(code)
    assert_ok(r)
    assert r.launched == ["add_relu_kernel"]


def test_kernel_through_method_chain_and_generic_launcher():
    code = HEADER + '''
KERNELS = {"add_relu": add_relu_kernel}


def run(kernel, grid, *args, **meta):
    return kernel[grid](*args, **meta)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return self._compute(x.contiguous(), y.contiguous())

    def _compute(self, x, y):
        out = torch.empty_like(x)
        run(KERNELS["add_relu"], (triton.cdiv(x.numel(), 1024),), x, y, out, x.numel(), BLOCK_SIZE=1024)
        return out
'''
    r = check(code)
    assert_ok(r)
    assert r.launched == ["add_relu_kernel"]


# --------------------------------------------------------------------------- failures (no flag)


def test_syntax_error_names_the_line():
    code = ADD.replace("        out = torch.empty_like(x)\n", "        out = torch.empty_like(x\n")
    r = check(code)
    assert r.reason == "static:syntax_error" and r.flags == []
    assert "line " in r.detail


def test_truncated_module_is_a_syntax_error():
    r = check(ADD[: ADD.index("grid = lambda")] + "grid = lambda meta: (triton.cdiv(n_ele")
    assert r.reason == "static:syntax_error" and not r.ok


def test_empty_code_is_a_syntax_error():
    assert check("   \n").reason == "static:syntax_error"


def test_no_modelnew():
    code = ADD.replace("class ModelNew(nn.Module)", "class FusedAddReLU(nn.Module)")
    r = check(code)
    assert r.reason == "static:no_modelnew" and r.flags == []


def test_modelnew_assigned_not_defined():
    code = ADD.replace("class ModelNew(nn.Module)", "class FusedAddReLU(nn.Module)") + "\nModelNew = FusedAddReLU\n"
    r = check(code)
    assert r.reason == "static:no_modelnew"
    assert "assigned, not defined" in r.detail


def test_no_forward():
    code = ADD.replace("def forward(self", "def __forward(self")
    assert check(code).reason == "static:no_forward"


def test_no_triton_kernel_in_pure_pytorch_solution():
    code = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)
'''
    r = check(code)
    assert r.reason == "static:no_triton_kernel"
    assert "pytorch_compute:torch.relu" in r.flags  # the compute is still reported


def test_kernel_defined_but_never_launched():
    code = model("        return x + y\n")
    r = check(code)
    assert r.reason == "static:kernel_unreachable" and r.flags == []
    assert "add_relu_kernel" in r.detail and r.launched == []


def test_kernel_launched_only_from_unreachable_method():
    code = model("        return x + y\n") + "\n    def fast_path(self, x, y):\n        return launch(x, y)\n"
    assert check(code).reason == "static:kernel_unreachable"


# --------------------------------------------------------------------------- try/except fallback


def test_try_except_fallback_in_forward():
    code = model("        try:\n            return launch(x, y)\n        except Exception:\n"
                 "            return torch.relu(x + y)\n")
    r = check(code)
    assert r.reason == "static:try_except_fallback"
    assert_flag(r, "static:try_except_fallback", "try_except_fallback", "        try:", code)
    assert "pytorch_compute:torch.relu" in r.flags


def test_try_in_launcher_function():
    code = HEADER.replace("    out = torch.empty_like(x)\n    n = out.numel()\n",
                          "    out = torch.empty_like(x)\n    n = out.numel()\n    try:\n        pass\n"
                          "    except RuntimeError:\n        return None\n") + \
        "\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n        return launch(x, y)\n"
    assert_flag(check(code), "static:try_except_fallback", "try_except_fallback")


def test_try_at_module_level_guarding_an_import_is_flagged():
    code = "try:\n    import triton\nexcept ImportError:\n    triton = None\n" + ADD
    r = check(code)
    assert_flag(r, "static:try_except_fallback", "try_except_fallback", "try:", code)


def test_contextlib_suppress_counts_as_try():
    code = "from contextlib import suppress\n" + model(
        "        with suppress(Exception):\n            return launch(x, y)\n        return x\n")
    r = check(code)
    assert_flag(r, "static:try_except_fallback", "try_except_fallback")
    assert "forbidden_import:contextlib" in r.flags


# --------------------------------------------------------------------------- reference model


def test_subclassing_reference_model():
    code = REFERENCE + "\n\n" + HEADER + '''
class ModelNew(Model):
    def forward(self, x, y):
        if x.numel() < 1024:
            return super().forward(x, y)
        return launch(x, y)
'''
    r = check(code, reference_source=REFERENCE)
    assert_flag(r, "static:reference_model_used", "reference_model_used:Model", "class ModelNew(Model)", code)


def test_instantiating_reference_model_without_reference_source():
    code = "from reference import Model\n" + model("        return self.ref(x, y)\n",
                                                 "        super().__init__()\n        self.ref = Model()\n")
    r = check(code)
    assert_flag(r, "static:reference_model_used", "reference_model_used:Model", "self.ref = Model()", code)
    assert "forbidden_import:reference" in r.flags


def test_reference_class_name_taken_from_reference_source():
    ref = REFERENCE.replace("Model", "ReluAdd")
    code = ref + "\n\n" + model("        return ReluAdd().forward(x, y)\n")
    r = check(code, reference_source=ref)
    assert_flag(r, "static:reference_model_used", "reference_model_used:ReluAdd")


def test_own_class_sharing_a_reference_helper_name_is_not_the_reference():
    ref = REFERENCE + "\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    own = HEADER + '''
class Block(nn.Module):
    def forward(self, x, y):
        return launch(x, y)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x, y):
        return self.block(x, y)
'''
    assert_ok(check(own, reference_source=ref))
    copied = own.replace("class Block(nn.Module):\n    def forward(self, x, y):\n        return launch(x, y)\n",
                         "class Block(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n")
    assert "reference_model_used:Block" in check(copied, reference_source=ref).flags


def test_reference_copied_but_unused_is_fine():
    code = REFERENCE + "\n\n" + HEADER + "\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n        return launch(x, y)\n"
    assert_ok(check(code, reference_source=REFERENCE))
    # a self-test under the main guard never runs when the verifier imports the module
    tested = code + ("\n\nif __name__ == '__main__':\n    x, y = get_inputs()\n"
                     "    print(torch.allclose(ModelNew()(x, y), Model()(x, y)))\n")
    assert_ok(check(tested, reference_source=REFERENCE))


# --------------------------------------------------------------------------- PyTorch compute


@pytest.mark.parametrize("forward,flag", [
    ("        return torch.matmul(x, y)\n", "pytorch_compute:torch.matmul"),
    ("        return F.softmax(launch(x, y), dim=-1)\n", "pytorch_compute:torch.nn.functional.softmax"),
    ("        return launch(x, y).sum(dim=1)\n", "pytorch_compute:Tensor.sum"),
    ("        out = x @ y\n        return launch(out, y)\n", "pytorch_compute:@"),
    ("        out = launch(x, y).contiguous(); out += y.exp()\n        return out\n", "pytorch_compute:Tensor.exp"),
    ("        return launch(x, y).clamp_(min=0)\n", "pytorch_compute:Tensor.clamp_"),
    ("        return torch.ops.aten.relu.default(x + y)\n", "pytorch_compute:torch.ops.aten.relu.default"),
    ("        return torch.Tensor.relu(x + y)\n", "pytorch_compute:torch.Tensor.relu"),
    ("        return nn.ReLU()(x + y)\n", "pytorch_compute:torch.nn.ReLU"),
    ("        return torch.linalg.vector_norm(launch(x, y))\n", "pytorch_compute:torch.linalg.vector_norm"),
    ("        return torch.where(x > 0, launch(x, y), y)\n", "pytorch_compute:torch.where"),
    ("        return torch.cat([launch(x, y), y])\n", "pytorch_compute:torch.cat"),
])
def test_pytorch_compute_in_forward_is_flagged(forward, flag):
    code = model(forward)
    r = check(code)
    assert_flag(r, "static:pytorch_compute", flag, forward.strip().split("\n")[0].strip(), code)


def test_aliased_torch_function_is_resolved():
    code = "from torch import matmul as mm\n" + model("        return launch(mm(x, y), y)\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.matmul")


def test_star_import_from_functional_is_resolved():
    code = "from torch.nn.functional import *\n" + model("        return gelu(launch(x, y))\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.nn.functional.gelu")


def test_nn_linear_called_in_forward_is_a_gemm_only_fusion_may_keep():
    code = model("        return launch(self.fc(x), y)\n", "        super().__init__()\n        self.fc = nn.Linear(16, 16)\n")
    assert_flag(check(code, "strict"), "static:pytorch_compute", "pytorch_compute:torch.nn.Linear",
                "return launch(self.fc(x), y)", code)
    assert_ok(check(code, "fusion"))


def test_nn_linear_weights_only_is_fine():
    code = model("        return launch(x @ self.fc.weight.t() if False else x, y)\n",
                 "        super().__init__()\n        self.fc = nn.Linear(16, 16)\n")
    r = check(code)
    assert "pytorch_compute:@" in r.flags  # the @ is flagged even in a dead branch
    assert "pytorch_compute:torch.nn.Linear" not in r.flags


def test_sequential_with_conv_and_relu_under_fusion():
    code = model("        return launch(self.body(x), y)\n",
                 "        super().__init__()\n        self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n")
    r = check(code, "fusion")
    assert_flag(r, "static:pytorch_compute", "pytorch_compute:torch.nn.ReLU")
    assert "pytorch_compute:torch.nn.Conv2d" not in r.flags
    assert "pytorch_compute:torch.nn.Conv2d" in check(code, "strict").flags


def test_module_list_called_in_a_loop():
    code = model("        for layer in self.layers:\n            x = layer(x)\n        return launch(x, y)\n",
                 "        super().__init__()\n        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.nn.Linear", "x = layer(x)", code)


def test_functional_conv_allowed_only_under_fusion():
    code = model("        w = torch.ones(8, 3, 3, 3)\n        return launch(F.conv2d(x, w), y)\n")
    assert_ok(check(code, "fusion"))
    assert_flag(check(code, "strict"), "static:pytorch_compute", "pytorch_compute:torch.nn.functional.conv2d")


@pytest.mark.parametrize("call", ["torch.matmul(x, y)", "torch.mm(x, y)", "torch.bmm(x, y)", "x @ y",
                                  "torch.addmm(y, x, y)", "torch.baddbmm(y, x, y)", "F.linear(x, y)",
                                  "x.matmul(y)"])
def test_gemm_family_is_heavy_under_fusion_only(call):
    code = model(f"        return launch({call}, y)\n")
    assert_ok(check(code, "fusion"))
    assert check(code, "strict").reason == "static:pytorch_compute"
    # extra heavy ops never loosen strict
    assert check(code, "strict", extra_heavy_ops=("matmul", "mm", "bmm", "addmm", "baddbmm", "linear")).reason \
        == "static:pytorch_compute"


def test_extra_heavy_ops_extend_fusion():
    code = model("        return launch(torch.einsum('ij,jk->ik', x, y), y)\n")
    assert "pytorch_compute:torch.einsum" in check(code, "fusion").flags
    assert_ok(check(code, "fusion", extra_heavy_ops=("einsum",)))


def test_compute_in_helper_method_and_module_function_is_found():
    code = model("        return self._post(launch(x, y))\n",
                 extra="\ndef _finish(t):\n    return t.softmax(-1)\n") + \
        "\n    def _post(self, t):\n        return _finish(t)\n"
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:Tensor.softmax", "return t.softmax(-1)", code)


def test_compute_outside_forward_reach_is_not_flagged():
    code = model("        return launch(x, y)\n",
                 "        super().__init__()\n        self.scale = torch.randn(4).abs().sum()\n",
                 extra="\ndef reference_impl(x, y):\n    return torch.relu(x + y)\n")
    assert_ok(check(code))


def test_host_compute_via_numpy_and_tolist():
    code = "import numpy as np\n" + model("        a = x.cpu().numpy()\n        return launch(torch.from_numpy(np.maximum(a, 0)), y)\n")
    r = check(code)
    assert_flag(r, "static:host_compute", "host_compute:Tensor.numpy")
    assert_flag(r, "static:host_compute", "host_compute:numpy.maximum")
    code2 = model("        vals = [max(v, 0.0) for v in (x + y).tolist()]\n        return launch(x, y)\n")
    assert_flag(check(code2), "static:host_compute", "host_compute:Tensor.tolist")


def test_python_container_methods_are_not_tensor_compute():
    code = model("        seen = set()\n        seen.add(x.shape[0])\n        sizes = {'n': x.numel()}\n"
                 "        keys = sorted(sizes.values())\n        shapes = [1, 3, 2]\n        shapes.sort()\n"
                 "        return launch(x, y)\n")
    assert_ok(check(code))


# --------------------------------------------------------------------------- forbidden imports, files, threads


@pytest.mark.parametrize("line,flag", [
    ("import os", "forbidden_import:os"),
    ("import subprocess", "forbidden_import:subprocess"),
    ("import socket", "forbidden_import:socket"),
    ("import ctypes", "forbidden_import:ctypes"),
    ("from sys import modules", "forbidden_import:sys"),
    ("import importlib", "forbidden_import:importlib"),
    ("import inspect", "forbidden_import:inspect"),
    ("import pickle", "forbidden_import:pickle"),
    ("import builtins", "forbidden_import:builtins"),
    ("import gc", "forbidden_import:gc"),
    ("from torch.utils.cpp_extension import load_inline", "forbidden_import:torch.utils.cpp_extension"),
    ("from torch.utils import cpp_extension", "forbidden_import:torch.utils.cpp_extension"),
    ("import torch._dynamo", "forbidden_import:torch._dynamo"),
    ("import torch._inductor.config", "forbidden_import:torch._inductor.config"),
    ("from triton.runtime.jit import JITFunction", "forbidden_import:triton.runtime.jit"),
    ("import triton.compiler", "forbidden_import:triton.compiler"),
    ("import cupy", "forbidden_import:cupy"),
    ("import einops", "forbidden_import:einops"),
    ("from . import helpers", "forbidden_import:relative"),
])
def test_forbidden_imports(line, flag):
    code = line + "\n" + ADD
    r = check(code)
    assert r.reason == "static:forbidden_import"
    assert_flag(r, "static:forbidden_import", flag, line, code)


def test_allowed_imports_are_quiet():
    code = ("import math\nimport functools\nimport typing\nfrom typing import Optional\nimport numpy as np\n"
            "from torch import nn\nfrom torch.nn import functional as F\nimport triton.language as tl\n"
            "from triton.runtime import driver\n" + ADD)
    assert_ok(check(code))


def test_torch_compile_and_reexported_os_are_flagged():
    code = model("        fn = torch.compile(launch)\n        torch.os.system('nvidia-smi')\n        return fn(x, y)\n")
    r = check(code)
    assert_flag(r, "static:forbidden_import", "forbidden_import:torch.compile", "torch.compile(launch)", code)
    assert_flag(r, "static:forbidden_import", "forbidden_import:torch.os", "torch.os.system", code)


@pytest.mark.parametrize("forward,flag", [
    ("        w = torch.load('/tmp/answer.pt')\n        return w\n", "file_access:torch.load"),
    ("        open('/tmp/log.txt', 'w').write(str(x.sum()))\n        return launch(x, y)\n", "file_access:open"),
    ("        return launch(x, torch.from_numpy(np.load('cache.npy')))\n", "file_access:numpy.load"),
    ("        torch.save(launch(x, y), 'out.pt')\n        return launch(x, y)\n", "file_access:torch.save"),
])
def test_file_access(forward, flag):
    code = "import numpy as np\n" + model(forward)
    assert_flag(check(code), "static:file_access", flag, forward.strip().split("\n")[0].strip()[:20], code)


def test_pathlib_read_text():
    code = "from pathlib import Path\n" + model("        Path('/etc/passwd').read_text()\n        return launch(x, y)\n")
    r = check(code)
    assert_flag(r, "static:file_access", "file_access:read_text")
    assert_flag(r, "static:forbidden_import", "forbidden_import:pathlib")


def test_threads():
    code = "import threading\nfrom concurrent.futures import ThreadPoolExecutor\n" + model(
        "        with ThreadPoolExecutor(2) as ex:\n            return ex.submit(launch, x, y).result()\n")
    r = check(code)
    assert r.reason == "static:threads"
    assert_flag(r, "static:threads", "threads:threading", "import threading", code)
    assert_flag(r, "static:threads", "threads:concurrent.futures")
    assert_flag(r, "static:threads", "threads:concurrent.futures.ThreadPoolExecutor", "with ThreadPoolExecutor", code)


# --------------------------------------------------------------------------- dynamic code


@pytest.mark.parametrize("forward,flag", [
    ("        return eval('launch(x, y)')\n", "dynamic_code:eval"),
    ("        exec('import os')\n        return launch(x, y)\n", "dynamic_code:exec"),
    ("        m = __import__('o' + 's')\n        return launch(x, y)\n", "dynamic_code:__import__"),
    ("        fn = getattr(torch, 'mat' + 'mul')\n        return fn(x, y)\n", "dynamic_code:getattr"),
    ("        fn = getattr(torch, 'matmul')\n        return fn(x, y)\n", "dynamic_code:getattr"),
    ("        g = globals()\n        return g['launch'](x, y)\n", "dynamic_code:globals"),
    ("        return getattr(self, self.impl_name)(x, y)\n", "dynamic_code:getattr"),
    ("        code = compile('x+y', '<s>', 'eval')\n        return launch(x, y)\n", "dynamic_code:compile"),
])
def test_dynamic_code(forward, flag):
    code = model(forward)
    assert_flag(check(code), "static:dynamic_code", flag, forward.strip().split("\n")[0].strip()[:18], code)


def test_getattr_with_constant_name_on_self_is_fine():
    code = model("        bias = getattr(self, 'bias', None)\n        return launch(x, y) if bias is None else launch(x, bias)\n")
    assert_ok(check(code))


# --------------------------------------------------------------------------- introspection and monkeypatching


@pytest.mark.parametrize("extra,flag,reason", [
    ("torch.allclose = lambda *a, **k: True\n", "monkeypatch:torch.allclose", "static:monkeypatch"),
    ("F.relu = lambda t: t\n", "monkeypatch:torch.nn.functional.relu", "static:monkeypatch"),
    ("triton.jit = lambda fn: fn\n", "monkeypatch:triton.jit", "static:monkeypatch"),
    ("torch.Tensor.__eq__ = lambda a, b: True\n", "monkeypatch:torch.Tensor.__eq__", "static:monkeypatch"),
    ("setattr(torch, 'allclose', lambda *a, **k: True)\n", "monkeypatch:torch.allclose", "static:monkeypatch"),
    ("torch.backends.cuda.matmul.allow_tf32 = True\n", "monkeypatch:torch.backends.cuda.matmul.allow_tf32", "static:monkeypatch"),
    ("torch.set_float32_matmul_precision('medium')\n", "monkeypatch:torch.set_float32_matmul_precision", "static:monkeypatch"),
    ("ModelNew.forward = lambda self, x, y: torch.relu(x + y)\n", "monkeypatch:forward_reassigned", "static:monkeypatch"),
    ("_subs = ().__class__.__base__.__subclasses__()\n", "introspection:__class__", "static:introspection"),
    ("_g = launch.__globals__\n", "introspection:__globals__", "static:introspection"),
    ("_b = __builtins__\n", "introspection:__builtins__", "static:introspection"),
    ("_d = torch._C._get_tracing_state()\n", "forbidden_import:torch._C", "static:forbidden_import"),
    ("from torch.utils._python_dispatch import TorchDispatchMode\n", "monkeypatch:torch.utils._python_dispatch", "static:monkeypatch"),
    ("lib = torch.library.Library('aten', 'IMPL')\n", "monkeypatch:torch.library", "static:monkeypatch"),
])
def test_introspection_and_monkeypatching(extra, flag, reason):
    code = model("        return launch(x, y)\n") + "\n\n" + extra
    assert_flag(check(code), reason, flag, extra.strip()[:25], code)


def test_tensor_subclass_and_dispatch_hooks():
    code = HEADER + '''
class Trusted(torch.Tensor):
    def __eq__(self, other):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x, y):
        return launch(x, y).as_subclass(Trusted)
'''
    r = check(code)
    assert_flag(r, "static:monkeypatch", "monkeypatch:tensor_subclass")
    assert_flag(r, "static:monkeypatch", "monkeypatch:def __torch_function__")
    assert_flag(r, "static:monkeypatch", "monkeypatch:def __eq__")


def test_forward_replaced_in_init_or_class_body():
    code = model("        return launch(x, y)\n",
                 "        super().__init__()\n        self.forward = lambda x, y: torch.relu(x + y)\n")
    assert_flag(check(code), "static:monkeypatch", "monkeypatch:forward_reassigned")


def test_call_override_is_followed_and_flagged():
    code = model("        return launch(x, y)\n") + "\n    def __call__(self, x, y):\n        return torch.relu(x + y)\n"
    r = check(code)
    assert_flag(r, "static:monkeypatch", "monkeypatch:def __call__")
    assert_flag(r, "static:pytorch_compute", "pytorch_compute:torch.relu")


def test_reseeding_in_forward():
    code = model("        torch.manual_seed(0)\n        return launch(x, y)\n")
    assert_flag(check(code), "static:monkeypatch", "monkeypatch:torch.manual_seed")
    init_seed = model("        return launch(x, y)\n", "        super().__init__()\n        torch.manual_seed(0)\n")
    assert_ok(check(init_seed))


def test_every_flag_names_its_line():
    code = "import os\n" + model("        try:\n            return torch.relu(x + y)\n        except Exception:\n"
                                 "            return eval('x')\n")
    r = check(code)
    assert len(r.findings) >= 4
    for f in r.findings:
        assert f.line > 0 and f"line {f.line}: " in r.detail
    assert r.detail.count("\n") + 1 == len(r.findings)
    assert r.reason == "static:forbidden_import"  # the first flag by line


def test_unknown_policy_is_a_value_error():
    with pytest.raises(ValueError, match="resolve_policy"):
        static_check(ADD, "auto")


def test_import_verdict_documents_choices():
    assert import_verdict("torch.nn.functional") is None
    assert import_verdict("triton.runtime.driver") is None
    assert import_verdict("triton.runtime.autotuner")[0] == "static:forbidden_import"
    assert import_verdict("threading")[0] == "static:threads"
    assert import_verdict("yaml")[1].startswith("not on the list")


# --------------------------------------------------------------------------- the policy table


def test_resolve_policy():
    assert pol.resolve_policy("auto", 1) == "strict"
    assert pol.resolve_policy("auto", 2) == "fusion"
    assert pol.resolve_policy("auto", 3) == "fusion"
    assert pol.resolve_policy("strict", 3) == "strict"
    assert pol.resolve_policy("Fusion", 1) == "fusion"
    with pytest.raises(ValueError, match="'auto', 'strict', 'fusion'"):
        pol.resolve_policy("lenient", 1)


class _Census(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_of(fn) -> list[str]:
    with _Census() as census:
        fn()
    assert census.ops, "the operation dispatched nothing"
    return census.ops


X = torch.randn(4, 8)
W = torch.randn(8, 8)
IMG = torch.randn(1, 3, 8, 8)
CONV2D = nn.Conv2d(3, 4, 3)
CONVT2D = nn.ConvTranspose2d(3, 4, 3)
UNFOLD = nn.Unfold(2)
LINEAR8 = nn.Linear(8, 8)

BOOKKEEPING = {
    "empty": lambda: torch.empty(4, 8),
    "empty_like": lambda: torch.empty_like(X),
    "zeros": lambda: torch.zeros(3),
    "full": lambda: torch.full((2,), 1.0),
    "new_empty": lambda: X.new_empty(3),
    "view": lambda: X.view(8, 4),
    "reshape_noncontig": lambda: X.t().reshape(32),
    "permute": lambda: X.permute(1, 0),
    "transpose_contiguous": lambda: X.transpose(0, 1).contiguous(),
    "unsqueeze_squeeze": lambda: X.unsqueeze(0).squeeze(0),
    "expand": lambda: X[:1].expand(4, 8),
    "slice_select": lambda: (X[1:3], X[0]),
    "as_strided": lambda: X.as_strided((2, 2), (1, 1)),
    "split_chunk_unbind": lambda: (X.split(2), X.chunk(2), X.unbind(0)),
    "to_dtype": lambda: X.to(torch.float64),
    "clone_detach": lambda: X.clone().detach(),
    "zero_fill_copy": lambda: torch.empty(4, 8).zero_().fill_(1.0).copy_(X),
    "item": lambda: X[0, 0].item(),
    "tensor_literal": lambda: torch.tensor([1.0, 2.0]),
}
COMPUTE = {
    "relu": lambda: torch.relu(X),
    "sum": lambda: X.sum(dim=1),
    "softmax": lambda: F.softmax(X, -1),
    "add": lambda: X + 1,
    "where": lambda: torch.where(X > 0, X, X),
    "masked_fill": lambda: X.masked_fill(X > 0, 0.0),
    "flip": lambda: X.flip(0),
    "arange": lambda: torch.arange(5),
}
DATA_MOVEMENT = {
    "cat": lambda: torch.cat([X, X]),
    "stack": lambda: torch.stack([X, X]),
    "pad": lambda: F.pad(X, (1, 1)),
}
CONVOLUTIONS = {
    "conv2d_module": lambda: CONV2D(IMG),
    "conv_transpose2d": lambda: CONVT2D(IMG),
    "conv1d": lambda: F.conv1d(torch.randn(1, 3, 8), torch.randn(4, 3, 3)),
    "conv3d": lambda: F.conv3d(torch.randn(1, 3, 4, 4, 4), torch.randn(4, 3, 3, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(BOOKKEEPING))
@pytest.mark.parametrize("policy", pol.POLICIES)
def test_bookkeeping_ops_allowed_under_every_policy(name, policy):
    for op in ops_of(BOOKKEEPING[name]):
        assert pol.runtime_op_allowed(policy, op), (name, op)


@pytest.mark.parametrize("name", sorted(COMPUTE))
@pytest.mark.parametrize("policy", pol.POLICIES)
def test_compute_ops_refused_under_every_policy(name, policy):
    """(GEMMs: test_gemm_ops_allowed_under_fusion_refused_under_strict.)"""
    ops = ops_of(COMPUTE[name])
    assert not all(pol.runtime_op_allowed(policy, op) for op in ops), (name, ops)


@pytest.mark.parametrize("name", sorted(DATA_MOVEMENT) + sorted(CONVOLUTIONS))
def test_data_movement_and_convolution_allowed_only_under_fusion(name):
    fn = {**DATA_MOVEMENT, **CONVOLUTIONS}[name]
    ops = [op for op in ops_of(fn) if "randn" not in op]
    assert all(pol.runtime_op_allowed("fusion", op) for op in ops), (name, ops)
    assert not all(pol.runtime_op_allowed("strict", op) for op in ops), (name, ops)


GEMMS = {
    "matmul": lambda: X @ W,
    "linear": lambda: F.linear(X, W, torch.randn(8)),
    "linear_3d": lambda: F.linear(X[None], W, torch.randn(8)),
    "nn_linear": lambda: LINEAR8(X),
    "bmm": lambda: torch.bmm(X[None], W[None]),
    "baddbmm": lambda: torch.baddbmm(X[None], X[None], W[None]),
    "matmul_vector": lambda: torch.matmul(X, W[0]),
    "dot": lambda: torch.matmul(W[0], W[1]),
}


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_gemm_ops_allowed_under_fusion_refused_under_strict(name):
    """KernelBench's Level-2 fusions leave the GEMM in PyTorch, like the convolution."""
    ops = [op for op in ops_of(GEMMS[name]) if "randn" not in op]
    assert all(pol.runtime_op_allowed("fusion", op) for op in ops), ops
    gemm = tuple(pol.GEMM_OPS)
    assert not all(pol.runtime_op_allowed("strict", op, extra_heavy_ops=gemm) for op in ops), ops


def test_dtype_promotion_questions_are_metadata():
    """`torch.promote_types` / `can_cast` dispatch aten ops of their own; they read no data."""
    ops = ops_of(lambda: (torch.promote_types(torch.float16, torch.float32),
                          torch.can_cast(torch.float16, torch.float32), torch.empty(1)))
    assert {"aten.promote_types.default", "aten.can_cast.default"} <= set(ops), ops
    for policy in pol.POLICIES:
        assert all(pol.runtime_op_allowed(policy, op) for op in ops), (policy, ops)
    code = model("        dt = torch.promote_types(x.dtype, y.dtype)\n"
                 "        rt = torch.result_type(x, y)\n        return launch(x.to(dt), y.to(rt))\n")
    assert_ok(check(code, "strict"))


def test_op_name_spellings():
    relu = torch.ops.aten.relu.default
    conv = torch.ops.aten.convolution.default
    for spelling in (conv, str(conv), "aten::convolution", "aten::convolution.out", "convolution",
                     "torch.ops.aten.convolution.default"):
        assert pol.runtime_op_allowed("fusion", spelling), spelling
    for spelling in (relu, str(relu), "aten::relu", "aten.relu.default", "relu"):
        assert not pol.runtime_op_allowed("fusion", spelling), spelling
    assert not pol.runtime_op_allowed("fusion", "aten::relu_")  # in-place is still compute
    assert not pol.runtime_op_allowed("fusion", "mylib.empty.default")  # custom ops never pass
    with pytest.raises(ValueError):
        pol.runtime_op_allowed("auto", "aten.empty.memory_format")


STATIC_AGREES = [
    # (surface kind, name, callable whose dispatched ops the runtime judges)
    ("torch", "empty_like", lambda: torch.empty_like(X)),
    ("torch", "relu", lambda: torch.relu(X)),
    ("torch", "matmul", lambda: torch.matmul(X, W)),
    ("torch", "cat", lambda: torch.cat([X, X])),
    ("F", "conv2d", lambda: F.conv2d(IMG, CONV2D.weight)),
    ("F", "softmax", lambda: F.softmax(X, -1)),
    ("F", "pad", lambda: F.pad(X, (1, 1))),
    ("method", "view", lambda: X.view(32)),
    ("method", "contiguous", lambda: X.t().contiguous()),
    ("method", "float", lambda: X.double().float()),
    ("method", "sum", lambda: X.sum()),
    ("method", "exp", lambda: X.exp()),
    ("F", "unfold", lambda: F.unfold(IMG, 2)),
    ("method", "unfold", lambda: X.unfold(0, 2, 1)),
    ("torch", "broadcast_to", lambda: torch.broadcast_to(X[:1], (4, 8))),
    ("method", "repeat", lambda: X.repeat(2, 1)),
    ("method", "new", lambda: X.new(3)),
    ("nn", "Conv2d", lambda: CONV2D(IMG)),
    ("nn", "Unfold", lambda: UNFOLD(IMG)),
    ("nn", "Linear", lambda: LINEAR8(X)),
    ("nn", "ReLU", lambda: nn.ReLU()(X)),
]


@pytest.mark.parametrize("kind,name,fn", STATIC_AGREES, ids=[f"{k}.{n}" for k, n, _ in STATIC_AGREES])
@pytest.mark.parametrize("policy", pol.POLICIES)
def test_static_lists_agree_with_runtime(kind, name, fn, policy):
    ops = [op for op in ops_of(fn) if "randn" not in op]
    runtime = all(pol.runtime_op_allowed(policy, op) for op in ops)
    if kind == "torch":
        static = name not in pol.torch_compute_functions(policy)
    elif kind == "F":
        static = name not in pol.functional_compute_functions(policy)
    elif kind == "method":
        static = name not in pol.tensor_compute_methods(policy)
    else:
        static = name not in pol.nn_compute_modules(policy)
    assert static == runtime, (kind, name, policy, ops)


def test_policy_lists_are_exposed_for_documentation():
    assert {"empty", "view", "_to_copy", "clone"} <= pol.allowed_ops("strict")
    assert "convolution" in pol.allowed_ops("fusion") and "convolution" not in pol.allowed_ops("strict")
    assert "mm" in pol.allowed_ops("fusion") and "mm" not in pol.allowed_ops("strict")
    assert "einsum" in pol.allowed_ops("fusion", extra_heavy_ops=("einsum",))
    assert "einsum" not in pol.allowed_ops("strict", extra_heavy_ops=("einsum",))
    assert "matmul" in pol.torch_compute_functions("strict") and "matmul" not in pol.torch_compute_functions("fusion")
    assert "Linear" not in pol.nn_compute_modules("fusion") and "Linear" in pol.nn_compute_modules("strict")
    assert "Conv2d" not in pol.nn_compute_modules("fusion") and "Conv2d" in pol.nn_compute_modules("strict")


# --------------------------------------------------------------------------- robustness


@pytest.mark.parametrize("source", [ADD, SOFTMAX, MATMUL, CONV, LINEAR], ids=["add", "softmax", "matmul", "conv", "linear"])
def test_every_truncation_gets_a_report(source):
    for cut in range(0, len(source), 37):
        r = check(source[:cut])
        assert isinstance(r, StaticReport)
        assert r.ok or r.reason.startswith("static:")


@pytest.mark.parametrize("code", [
    "x = " + "(" * 300 + "1" + ")" * 300,
    "x = " + "-" * 20000 + "1",
    "x = [" + ", ".join(["[1]"] * 5000) + "]",
    "\x00import torch",
    "class ModelNew:\n    pass\n" * 200,
])
def test_pathological_sources_never_raise(code):
    r = check(code)
    assert isinstance(r, StaticReport) and not r.ok


# --------------------------------------------------------------------------- compute hidden behind names


def test_torch_function_bound_to_a_global_name():
    code = model("        return act(launch(x, y))\n", extra="\nact = F.gelu\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.nn.functional.gelu",
                "return act(launch(x, y))", code)


def test_nn_module_bound_to_a_global_name():
    code = model("        return _relu(x + y)\n", extra="\n_relu = nn.ReLU()\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.nn.ReLU")


def test_lambda_stored_on_self_is_followed():
    code = model("        return self.post(launch(x, y))\n",
                 "        super().__init__()\n        self.post = lambda t: torch.tanh(t)\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:torch.tanh")


def test_private_forward_of_an_nn_module_is_still_the_module():
    code = model("        w = self.conv.weight\n        return launch(self.conv._conv_forward(x, w, None), y)\n",
                 "        super().__init__()\n        self.conv = nn.Conv2d(3, 3, 3)\n")
    assert_flag(check(code, "strict"), "static:pytorch_compute", "pytorch_compute:torch.nn.Conv2d")
    assert_ok(check(code, "fusion"))


def test_kernel_held_on_self_is_launched():
    code = model("        out = torch.empty_like(x)\n        self.kernel[(4,)](x, y, out, x.numel(), BLOCK_SIZE=1024)\n        return out\n",
                 "        super().__init__()\n        self.kernel = add_relu_kernel\n")
    r = check(code)
    assert_ok(r)
    assert r.launched == ["add_relu_kernel"]


def test_module_level_function_named_like_a_tensor_method_does_not_hide_compute():
    code = model("        return launch(x, y).softmax(-1)\n", extra="\ndef softmax(t):\n    return launch(t, t)\n")
    assert_flag(check(code), "static:pytorch_compute", "pytorch_compute:Tensor.softmax")
