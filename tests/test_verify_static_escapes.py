"""Static check against escapes (issue 15): what an attribute chain really reaches, constant-name
getattr, host compute, class tricks and timer tampering, each in several spellings, and the honest
corpora that must still pass.

The rules are general (resolve.py follows chains through the real module objects); each test
writes a realistic candidate with the trick in it and asserts the reason and flag. Nothing here
runs a candidate.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from tritonrl_lib.verify.policy import resolve_policy
from tritonrl_lib.verify.static import StaticReport, static_check
from tritonrl_lib.verify.static import resolve

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).parent / "verifier_cases"

TEMPLATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl
{imports}


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

{module}

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
{forward}
        return out
'''


def candidate(imports: str = "", module: str = "", forward: str = "") -> str:
    body = "\n".join("        " + line for line in forward.strip("\n").split("\n")) if forward.strip() else ""
    return TEMPLATE.format(imports=imports, module=module, forward=body)


def flagged(code: str, reason: str, flag: str, policy: str = "strict") -> StaticReport:
    r = static_check(code, policy)
    assert not r.ok, code
    assert flag in r.flags, (r.flags, r.detail)
    assert any(f.flag == flag and f.reason == reason and f.line > 0 for f in r.findings), r.detail
    return r


def passes(code: str, policy: str = "strict") -> None:
    r = static_check(code, policy)
    assert r.ok, r.detail


def test_the_template_itself_passes():
    passes(candidate())


# --------------------------------------------------------------------------- chains through allowed modules

@pytest.mark.parametrize("imports,module,reason,flag", [
    ("import logging", "T = logging.threading", "static:threads", "threads:logging.threading"),
    ("import logging", "M = logging.sys.modules", "static:forbidden_import", "forbidden_import:logging.sys"),
    ("import typing", "M = typing.sys.modules['gc']", "static:forbidden_import", "forbidden_import:typing.sys"),
    ("import enum", "run = enum.bltns.exec", "static:forbidden_import", "forbidden_import:enum.bltns"),
    ("import dataclasses", "o = dataclasses.builtins.open", "static:forbidden_import",
     "forbidden_import:dataclasses.builtins"),
    ("import random", "fd = random._os.open", "static:forbidden_import", "forbidden_import:random._os"),
    ("import warnings", "s = warnings.sys", "static:forbidden_import", "forbidden_import:warnings.sys"),
    ("import dataclasses", "st = dataclasses.inspect.stack", "static:forbidden_import",
     "forbidden_import:dataclasses.inspect"),
    ("", "mp = torch.cuda.tunable.mp", "static:forbidden_import", "forbidden_import:torch.cuda.tunable"),
    ("import functools", "lock = functools.RLock()", "static:threads", "threads:functools.RLock"),
    ("import logging", "f = logging.currentframe", "static:introspection", "introspection:logging.currentframe"),
    ("", "g = torch.distributed", "static:threads", "threads:torch.distributed"),
    ("", "torch.ops.load_library('lib.so')", "static:forbidden_import", "forbidden_import:torch.ops.load_library"),
    ("", "h = nn.modules.module.register_module_forward_hook(lambda m, i, o: o)", "static:monkeypatch",
     "monkeypatch:torch.nn.modules.module.register_module"),
], ids=lambda v: v if isinstance(v, str) and "." in v and " " not in v else None)
def test_a_chain_through_an_allowed_module_is_judged_by_what_it_reaches(imports, module, reason, flag):
    flagged(candidate(imports, module), reason, flag)


@pytest.mark.parametrize("imports,module", [
    ("import logging as lg", "T = lg.threading"),  # an import alias
    ("from logging import threading", ""),  # a from-import of a module attribute
    ("from logging import threading as worker", ""),
    ("import logging", "log = logging\nT = log.threading"),  # a module-level re-binding
    ("import logging", "def thread_api():\n    log = logging\n    return log.threading\n"),  # a local one
    ("import logging", "T = getattr(logging, 'threading')"),  # constant-name getattr
    ("import logging", "T = [logging][0].threading"),  # through a literal container
    ("import logging", "T = (logging if True else None).threading"),
    ("import logging", "def lib():\n    return logging\n\n\nT = lib().threading"),  # a function's result
])
def test_the_same_chain_is_caught_under_every_spelling(imports, module):
    flagged(candidate(imports, module), "static:threads", "threads:logging.threading")


def test_a_module_passed_around_as_a_value_is_flagged():
    for module in ("def lib():\n    return logging\n", "def lib(m=logging):\n    return m\n",
                   "LIBS = {'log': logging}\n", "x = list(map(id, [logging]))\n"):
        flagged(candidate("import logging", module), "static:dynamic_code", "dynamic_code:module_value")


def test_denied_builtins_passed_as_values_are_flagged():
    flagged(candidate("import functools, logging", "s = functools.reduce(getattr, ['sys'], logging)"),
            "static:dynamic_code", "dynamic_code:getattr")
    flagged(candidate(module="look = getattr\n"), "static:dynamic_code", "dynamic_code:getattr")
    flagged(candidate(module="run = exec\n"), "static:dynamic_code", "dynamic_code:exec")


def test_a_star_import_is_judged_by_the_names_used_from_it():
    # torch.nn.functional binds `importlib` too: using it is reaching importlib
    flagged(candidate("from torch.nn.functional import *", "os_ = importlib.import_module('os')"),
            "static:forbidden_import", "forbidden_import:torch.nn.functional.importlib")
    passes(candidate("from torch.nn.functional import *\nfrom math import *", "LIMIT = ceil(pi)"))


@pytest.mark.parametrize("imports,module,reason,flag", [
    ("import typing", "hints = typing.get_type_hints", "static:dynamic_code", "dynamic_code:typing.get_type_hints"),
    ("import warnings", "line = warnings.formatwarning('', UserWarning, 'task.py', 1)", "static:file_access",
     "file_access:warnings.formatwarning"),
    ("import logging", "log = logging.FileHandler('task.py', mode='r')", "static:file_access",
     "file_access:logging.FileHandler"),
    ("", "out = torch.utils.collect_env.run('cat task.py')", "static:forbidden_import",
     "forbidden_import:torch.utils.collect_env"),
    ("", "t = torch.utils.benchmark.Timer('1 + 1')", "static:dynamic_code", "dynamic_code:torch.utils.benchmark"),
    ("", "build = triton.compile", "static:forbidden_import", "forbidden_import:triton.compiler"),
    ("", "swap = torch.utils.swap_tensors", "static:monkeypatch", "monkeypatch:torch.utils.swap_tensors"),
    ("", "help(torch)", "static:introspection", "introspection:help"),
])
def test_allowed_modules_functions_that_reach_files_code_or_internals(imports, module, reason, flag):
    flagged(candidate(imports, module), reason, flag)


def test_string_annotations_are_judged_as_the_code_they_evaluate_to():
    flagged(candidate("import logging", "def f(a: 'logging.sys'):\n    return a\n"), "static:forbidden_import",
            "forbidden_import:logging.sys")
    flagged(candidate(module="def f(a: \"__import__('os')\"):\n    return a\n"), "static:dynamic_code",
            "dynamic_code:__import__")
    passes(candidate("from typing import Optional, Tuple",
                     "def f(a: 'torch.Tensor', b: Optional['torch.Tensor'] = None) -> 'Tuple[int, int]':\n"
                     "    return (1, 2)\n"))


def test_kernel_bodies_compute_with_triton_language_only():
    kernel = ("@triton.jit\ndef host_kernel(x_ptr, BLOCK: tl.constexpr):\n"
              "    v = tl.load(x_ptr + tl.arange(0, BLOCK), other=-float('inf'))\n    {line}\n")
    flagged(candidate("import numpy as np", kernel.format(line="w = np.maximum(v.handle.data, 0)")),
            "static:host_compute", "host_compute:numpy.maximum")
    flagged(candidate("import numpy as np", kernel.format(line="w = v.handle")), "static:introspection",
            "introspection:handle")
    flagged(candidate("", "def helper(v):\n    return torch.relu(v)\n\n\n" + kernel.format(line="w = helper(v)")),
            "static:pytorch_compute", "pytorch_compute:torch.relu")
    passes(candidate("", kernel.format(line="n = triton.cdiv(BLOCK, 2)")))


def test_frames_and_raw_memory_are_internals():
    flagged(candidate("import logging", "def caller():\n    return logging.currentframe().f_back.f_locals\n"),
            "static:introspection", "introspection:f_locals")
    flagged(candidate("import numpy as np", "ADDR = np.zeros(3).ctypes.data"), "static:introspection",
            "introspection:ctypes")


@pytest.mark.parametrize("line,flag", [
    ("import logging.handlers", "threads:logging.handlers"),
    ("import torch.utils.data", "threads:torch.utils.data"),
    ("import numpy.ctypeslib", "forbidden_import:numpy.ctypeslib"),
    ("import numpy.f2py", "forbidden_import:numpy.f2py"),
])
def test_newly_denied_submodules_of_allowed_packages(line, flag):
    r = static_check(candidate(line), "strict")
    assert flag in r.flags, r.detail


def test_legitimate_module_use_stays_quiet():
    passes(candidate("import math\nimport functools\nfrom typing import Optional\nfrom dataclasses import dataclass\n"
                     "import numpy as np\nimport triton.language.extra",
                     "@dataclass\nclass Config:\n    block: Optional[int] = None\n\n\n"
                     "@functools.lru_cache(maxsize=None)\ndef block_for(n):\n"
                     "    return min(1024, triton.next_power_of_2(n))\n\n\nSCALE = math.sqrt(2.0)\n"
                     "TWO = int(np.prod((1, 2)))\nF32 = np.float32\n",
                     "assert out.dtype in (torch.float32, torch.float16)"))


# --------------------------------------------------------------------------- constant-name getattr

def test_constant_getattr_is_judged_like_the_attribute():
    flagged(candidate(forward="arr = getattr(x.cpu(), 'numpy')()"), "static:host_compute", "host_compute:Tensor.numpy")
    flagged(candidate(forward="out = getattr(torch, 'relu')(x)"), "static:pytorch_compute",
            "pytorch_compute:torch.relu")
    flagged(candidate(forward="out = getattr(x, 'exp')()"), "static:pytorch_compute", "pytorch_compute:Tensor.exp")
    flagged(candidate(forward="out = getattr(x, 'missing', x).exp()"), "static:pytorch_compute",
            "pytorch_compute:Tensor.exp")
    passes(candidate(forward="bias = getattr(self, 'bias', None)\nn = getattr(x, 'shape')[0]"))
    # non-literal names stay flagged as before
    flagged(candidate(forward="name = 'num' + 'py'\nout = getattr(x, name)()"), "static:dynamic_code",
            "dynamic_code:getattr")


# --------------------------------------------------------------------------- host compute

@pytest.mark.parametrize("forward,flag", [
    ("total = 0.0\nfor i in range(x.shape[0]):\n    total += x[i].item()", "host_compute:Tensor.item"),
    ("i = 0\nwhile i < 4:\n    v = x[i].item()\n    i += 1", "host_compute:Tensor.item"),
    ("flat = x.reshape(-1)\nvals = [float(flat[i]) for i in range(flat.numel())]", "host_compute:float"),
    ("vals = []\nfor v in x:\n    vals.append(v)", "host_compute:iteration"),
    ("vals = list(x.reshape(-1))", "host_compute:iteration"),
    ("vals = list(map(float, x.flatten()))", "host_compute:iteration"),
    ("for a, b in zip(x, out):\n    pass", "host_compute:iteration"),
    ("m = max(*x)", "host_compute:iteration"),
    ("a, b = x", "host_compute:iteration"),
    ("vals = [1.0, 2.0]\nout = torch.tensor(vals, device=x.device)", "host_compute:torch.tensor"),
    ("out = torch.as_tensor(out.cpu())", "host_compute:torch.as_tensor"),
    ("out = x.new_tensor([v * 2 for v in range(3)])", "host_compute:Tensor.new_tensor"),
    ("out = torch.FloatTensor([float(v) for v in range(3)])", "host_compute:torch.FloatTensor"),
    ("f = x.numpy", "host_compute:Tensor.numpy"),
    ("vals = list(map(torch.Tensor.tolist, [x]))", "host_compute:Tensor.tolist"),
])
def test_host_compute_in_forward(forward, flag):
    flagged(candidate(forward=forward), "static:host_compute", flag)


@pytest.mark.parametrize("imports,module,forward,flag", [
    ("import functools\nimport numpy", "row_max = functools.partial(numpy.max, axis=1)", "m = row_max(out)",
     "host_compute:numpy.max"),
    ("import numpy as np", "OPS = {'exp': np.exp}", "e = OPS['exp']", "host_compute:numpy.exp"),
    ("import numpy as np", "vexp = np.vectorize(lambda v: v)", "e = vexp(1.0)", "host_compute:numpy.vectorize"),
    ("import functools\nimport numpy as np", "", "f = functools.partial(np.exp)", "host_compute:numpy.exp"),
    ("import numpy as np", "", "e = np.exp\ny = e(1.0)", "host_compute:numpy.exp"),
    ("from numpy import exp as e", "", "y = e(1.0)", "host_compute:numpy.exp"),
    ("import numpy as np", "", "out = torch.from_numpy(np.zeros(3))", "host_compute:torch.from_numpy"),
])
def test_numpy_reached_any_way(imports, module, forward, flag):
    flagged(candidate(imports, module, forward), "static:host_compute", flag)


def test_legitimate_scalar_reads_and_loops_pass():
    passes(candidate("import numpy as np", "EPS = 1e-5\n",
                     "n = x.size(0)\nm = int(n)\nfirst = float(x.reshape(-1)[0])\n"
                     "half = torch.tensor(0.5)\npair = torch.tensor([1.0, 2.0])\neps = torch.tensor(EPS)\n"
                     "total = int(np.prod(x.shape))\n"
                     "for s in x.shape:\n    m *= s\n"
                     "for chunk in x.split(4):\n    m += chunk.numel()\n"
                     "shape = x.shape\nfor i in range(len(shape)):\n    m *= int(shape[i])\n"
                     "for b in range(x.shape[0]):\n"
                     "    copy_kernel[(1,)](x[b], out[b], x[b].numel(), BLOCK=1024)\n"
                     "rows, cols = out.shape\nq, k = out.chunk(2)"))


MODULE_WITH_LAUNCHER = TEMPLATE.split("\nclass ModelNew")[0].format(imports="import numpy as np", module="") + (
    "\n\ndef launch(x):\n    out = torch.empty_like(x)\n"
    "    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\n    return out\n")
HOST_RELU = "torch.from_numpy(np.maximum({t}.numpy(), 0))"

INDIRECT = {
    # a factory's closure, stored on self in __init__ and called in forward
    "factory_closure": f"""
def make():
    def f(t):
        return {HOST_RELU.format(t='t')}
    return f


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = make()

    def forward(self, x):
        launch(x)
        return self.f(x)
""",
    # a decorator's wrapper replaces the launcher
    "decorator_wrapper": f"""
def host(fn):
    def wrapper(x):
        return {HOST_RELU.format(t='x')}
    return wrapper


@host
def relu(x):
    return launch(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
""",
    # a class-body attribute
    "class_body_attribute": """
class ModelNew(nn.Module):
    act = staticmethod(np.maximum)

    def forward(self, x):
        launch(x)
        return self.act(x, 0)
""",
    # a module-level table of lambdas
    "table_of_lambdas": f"""
OPS = {{'relu': lambda t: {HOST_RELU.format(t='t')}}}


class ModelNew(nn.Module):
    def forward(self, x):
        launch(x)
        return OPS['relu'](x)
""",
    # an operator dunder of a local class, run by `+`
    "operator_dunder": f"""
class Box:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return {HOST_RELU.format(t='self.t')}


class ModelNew(nn.Module):
    def forward(self, x):
        launch(x)
        return Box(x) + 1
""",
}


@pytest.mark.parametrize("name", sorted(INDIRECT))
def test_host_compute_reached_through_indirect_code(name):
    flagged(MODULE_WITH_LAUNCHER + INDIRECT[name], "static:host_compute", "host_compute:numpy.maximum")


def test_code_that_only_runs_at_import_or_in_init_is_not_forward():
    passes(MODULE_WITH_LAUNCHER + """

def build(n):
    return np.arange(n)


TABLE = build(4)


class Lin(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.empty(n, n))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.w)

    def forward(self, x):
        return launch(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = Lin(4)
        self.table = build(4)

    def forward(self, x):
        return self.lin(x) if TABLE is not None and self.table is not None else x
""")


def test_host_compute_outside_forward_reach_is_not_judged():
    passes(candidate("import numpy as np", "TABLE = np.exp(np.arange(4.0))\n\n"
                     "def reference(x):\n    return torch.tensor([float(v) for v in x.reshape(-1)])\n"))


# --------------------------------------------------------------------------- class tricks

@pytest.mark.parametrize("module,forward,flag", [
    ("_Tensor = torch.Tensor\n\n\nclass Lazy(_Tensor):\n    pass\n", "", "monkeypatch:tensor_subclass"),
    ("class Lazy(nn.Parameter):\n    pass\n", "", "monkeypatch:tensor_subclass"),
    ("", "out = getattr(out, 'as_subclass')(torch.Tensor)", "monkeypatch:tensor_subclass"),
    ("", "out = out.as_subclass(torch.Tensor)", "monkeypatch:tensor_subclass"),
    ("class Hooked:\n    __torch_function__ = classmethod(lambda *a, **k: None)\n", "",
     "monkeypatch:def __torch_function__"),
    ("class Hooked:\n    def __torch_dispatch__(self, *a):\n        return None\n", "", "monkeypatch:def __torch_dispatch__"),
    ("class Proxy:\n    def __init__(self, t):\n        self.t = t\n\n    def data_ptr(self):\n"
     "        return self.t.data_ptr()\n", "", "monkeypatch:tensor_proxy"),
    ("class Proxy:\n    def untyped_storage(self):\n        return None\n", "", "monkeypatch:tensor_proxy"),
])
def test_class_tricks(module, forward, flag):
    flagged(candidate(module=module, forward=forward), "static:monkeypatch", flag)


# --------------------------------------------------------------------------- timer tampering

@pytest.mark.parametrize("imports,module,flag", [
    ("", "_Ev = torch.cuda.Event\n_Ev.elapsed_time = lambda self, end: 1.0", "monkeypatch:torch.cuda.Event.elapsed_time"),
    ("", "_Ev = torch.cuda.Event\nsetattr(_Ev, 'elapsed_time', lambda self, end: 1.0)",
     "monkeypatch:torch.cuda.Event.elapsed_time"),
    ("", "_cuda = torch.cuda\n_cuda.synchronize = lambda device=None: None", "monkeypatch:torch.cuda.synchronize"),
    ("import time", "clock = time\nclock.perf_counter = lambda: 0.0", "monkeypatch:time.perf_counter"),
    ("", "_t = triton\n_t.testing.do_bench = lambda *a, **k: 1.0", "monkeypatch:triton.testing.do_bench"),
    ("", "def patch(cls):\n    cls.elapsed_time = lambda self, end: 1.0\n\n\npatch(torch.cuda.Event)",
     "monkeypatch:torch.cuda.Event.elapsed_time"),
    ("", "def quiet():\n    c = torch.cuda\n    c.synchronize = lambda: None\n\n\nquiet()",
     "monkeypatch:torch.cuda.synchronize"),
    ("", "(c := torch.cuda).synchronize = lambda: None", "monkeypatch:torch.cuda.synchronize"),
    ("", "del torch.cuda.synchronize", "monkeypatch:torch.cuda.synchronize"),
    ("import time", "for time.perf_counter in [lambda: 0.0]:\n    pass", "monkeypatch:time.perf_counter"),
    ("import time", "clock, n = time, 1\nclock.perf_counter = lambda: 0.0", "monkeypatch:time.perf_counter"),
    ("", "ev = torch.cuda.Event()\ntype(ev).elapsed_time = lambda self, end: 1.0", "monkeypatch:type(ev).elapsed_time"),
    ("", "torch.cuda.__dict__['synchronize'] = lambda: None", "monkeypatch:torch.cuda.__dict__['synchronize']"),
    ("", "def event_class():\n    return torch.cuda.Event\n\n\nevent_class().elapsed_time = lambda self, end: 1.0",
     "monkeypatch:torch.cuda.Event.elapsed_time"),
])
def test_timer_tampering_under_any_name(imports, module, flag):
    flagged(candidate(imports, module), "static:monkeypatch", flag)


def test_writes_to_the_candidates_own_objects_are_fine():
    passes(candidate(module="class Cache:\n    pass\n\n\nSTATE = Cache()\nSTATE.hits = 0\nTABLE = {}\nTABLE['k'] = 1\n",
                     forward="self.calls = 1\nself.memo = {}\nself.memo['x'] = out"))


# --------------------------------------------------------------------------- the resolver

def test_the_resolver_never_runs_a_modules_lazy_getattr():
    calls = []
    lazy = types.ModuleType("lazy_test_module")
    lazy.__getattr__ = lambda name: calls.append(name)
    r = resolve.Resolver()
    assert r.attr(lazy, "anything") is resolve.MISSING
    assert calls == []


def test_the_resolver_follows_real_modules_and_caches_resolved_chains():
    import enum
    import sys as real_sys

    r = resolve.Resolver()
    hit = r.judge("enum.bltns.exec")
    assert hit and hit.written == "enum.bltns" and hit.target == "builtins"
    assert r.canonical("torch.functional.F.relu") == "torch.nn.functional.relu"
    assert r.obj("logging.sys") is real_sys
    assert r.obj("enum.bltns") is enum.bltns and "enum.bltns.exec" in resolve._CHAINS
    assert r.judge("torch.nn.functional.relu") is None and r.judge("triton.runtime.driver") is None


# --------------------------------------------------------------------------- honest corpora

def _builtin_solutions():
    root = ROOT / "tritonrl_lib" / "tasks" / "builtin"
    for t in json.loads((root / "manifest.json").read_text())["tasks"]:
        yield pytest.param((root / t["solution"]).read_text(), (root / t["file"]).read_text(), t["level"], id=t["id"])


def test_every_builtin_reference_solution_passes_statically():
    failed = [(p.id, r.detail) for p in _builtin_solutions()
              for r in [static_check(p.values[0], resolve_policy("auto", p.values[2]), p.values[1])] if not r.ok]
    assert not failed, failed


LEVEL2_CANDIDATES = ("conv", "gemm", "attention", "linear", "gated_linear")


def test_every_honest_candidate_passes_statically():
    names = sorted({p.stem for p in (CASES / "candidates").glob("*_ok.py")} |
                   {p.stem for p in (CASES / "candidates").glob("peer_ok_*.py")})
    failed = []
    for name in names:
        level2 = "dropout" in name or name.startswith(LEVEL2_CANDIDATES)  # solutions of Level-2 test tasks
        r = static_check((CASES / "candidates" / f"{name}.py").read_text(), "fusion" if level2 else "strict")
        if not r.ok:
            failed.append((name, r.detail))
    assert len(names) >= 20 and not failed, failed


def test_every_honest_kernelbench_solution_passes_statically():
    solutions = sorted((ROOT / "benchmarks" / "kernelbench_solutions").glob("level*/*.py"))
    assert solutions
    failed = [(p.name, r.detail) for p in solutions
              for r in [static_check(p.read_text(), resolve_policy("auto", int(p.parent.name[-1])))] if not r.ok]
    assert not failed, failed
