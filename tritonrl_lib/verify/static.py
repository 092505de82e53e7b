"""Static stage of the verifier: read a candidate's AST and reject it before anything runs.

Nothing in the candidate is executed or imported here. The checks, in the order a reason is chosen:

1. failures (not cheats, no flag): the code does not parse (`static:syntax_error`), defines no
   `class ModelNew` (`static:no_modelnew`) or no `forward` in it (`static:no_forward`), has no
   `@triton.jit` / `@triton.autotune` function (`static:no_triton_kernel`);
2. cheat flags (any flag means reward 0), each with the line that raised it: try/except fallback,
   the reference `Model` used, PyTorch compute the policy forbids, forbidden imports, file access,
   threads, dynamic code, introspection and monkeypatching, host (numpy / tolist) compute;
3. `static:kernel_unreachable`: no Triton kernel is launched from code `ModelNew.forward` can
   reach (methods via self, module-level launchers, helper classes, transitively).

Security checks (imports, files, dynamic code, patching) cover the whole module; compute checks
cover the code reachable from `forward` (`__init__` may use PyTorch freely to build weights),
never the bodies of Triton kernels. Plain tensor operators (`a + b`) cannot be typed statically
and are left to the runtime op census; `a @ b` is flagged here. The policy tables come from
`policy.py`, so static and runtime judge PyTorch names the same way.
"""

from __future__ import annotations

import ast
import builtins
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from tritonrl_lib.verify import policy as pol

# --------------------------------------------------------------------------- report


@dataclass
class Finding:
    reason: str  # "static:<what>"
    line: int
    message: str  # for people, names the construct and the fix
    flag: str | None = None  # cheat flag; None for a plain failure


@dataclass
class StaticReport:
    ok: bool
    reason: str  # "ok" or "static:<what>"
    detail: str  # one line per finding, each naming its line
    flags: list[str]  # cheat flags, deduplicated, in order of first appearance
    kernels: list[str]  # every @triton.jit / @triton.autotune function, in source order
    launched: list[str] = field(default_factory=list)  # kernels launched from forward-reachable code
    findings: list[Finding] = field(default_factory=list)


# --------------------------------------------------------------------------- import rules

# Modules a solution may import (the module itself or anything under it), unless denied below.
ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "math", "cmath", "numbers", "typing", "typing_extensions", "functools",
    "itertools", "collections", "dataclasses", "enum", "abc", "operator", "warnings", "copy",
    "numpy", "__future__", "random", "time", "string", "logging",
})

# module prefix -> (reason, why). A denied prefix wins over an allowed one (torch.utils.cpp_extension).
_PROCESS = "process / OS access"
_FILES = "file system access"
_INTRO = "interpreter internals (introspection, import machinery)"
_NET = "network access"
_COMPILE = "compiles PyTorch or native code instead of Triton"
_TRITON_INTERNAL = "Triton internals (reaching other kernels or the compiler)"
_OTHER_KERNELS = "another kernel / compute library instead of Triton"
_DISPATCH = "intercepts PyTorch's dispatch (can rewrite what ops do)"

DENIED_IMPORTS: dict[str, tuple[str, str]] = {
    **{m: ("static:forbidden_import", _PROCESS) for m in (
        "os", "sys", "subprocess", "signal", "resource", "pty", "posix", "nt", "platform",
        "sysconfig", "site", "atexit", "faulthandler", "tracemalloc", "ctypes", "cffi", "mmap",
        "fcntl", "_posixsubprocess", "pwd", "grp", "termios")},
    **{m: ("static:threads", "threads / processes") for m in (
        "threading", "_thread", "multiprocessing", "concurrent", "torch.multiprocessing",
        "asyncio", "sched", "queue")},
    **{m: ("static:forbidden_import", _FILES) for m in (
        "io", "pathlib", "shutil", "tempfile", "glob", "fnmatch", "shelve", "pickle", "dill",
        "cloudpickle", "marshal", "dbm", "sqlite3", "zipfile", "tarfile", "gzip", "bz2", "lzma",
        "csv", "json", "h5py", "safetensors", "torch.serialization", "torch.package", "torch.hub",
        "torch.utils.model_zoo", "linecache", "fileinput")},
    **{m: ("static:forbidden_import", _INTRO) for m in (
        "importlib", "builtins", "gc", "inspect", "types", "weakref", "code", "codeop", "runpy",
        "zipimport", "pkgutil", "traceback", "dis", "ast", "symtable", "contextlib", "sysconfig",
        "ctypes.util", "torch._C", "torch._ops", "torch._guards", "torch._jit_internal",
        "torch._utils_internal", "triton._C")},
    **{m: ("static:forbidden_import", _NET) for m in (
        "socket", "ssl", "requests", "urllib", "urllib3", "http", "httpx", "aiohttp", "ftplib",
        "smtplib", "xmlrpc", "websocket", "websockets")},
    **{m: ("static:forbidden_import", _COMPILE) for m in (
        "torch.utils.cpp_extension", "torch._dynamo", "torch._inductor", "torch.compiler",
        "torch._compile", "torch.jit", "torch.fx", "torch.export", "torch._export",
        "torch._prims", "torch._refs", "torch._decomp", "torch._functorch", "torch.func",
        "torch._higher_order_ops", "torch.cuda.jiterator", "torch._VF", "torch._vmap_internals",
        "torch.onnx", "torch.ao", "torch.quantization", "numba", "cython", "setuptools",
        "distutils")},
    **{m: ("static:forbidden_import", _TRITON_INTERNAL) for m in (
        "triton.runtime", "triton.compiler", "triton.backends", "triton.tools", "triton.ops",
        "triton.testing", "triton.knobs", "triton.experimental", "triton.profiler")},
    **{m: ("static:forbidden_import", _OTHER_KERNELS) for m in (
        "cupy", "pycuda", "cuda", "nvidia", "jax", "jaxlib", "tensorflow", "tvm", "tilelang",
        "cutlass", "apex", "xformers", "flash_attn", "liger_kernel", "transformer_engine",
        "torchvision", "torchaudio", "scipy", "sklearn", "einops", "thunder", "tensorrt",
        "torch_tensorrt", "deepspeed", "bitsandbytes", "vllm", "sgl_kernel", "kernels")},
    **{m: ("static:monkeypatch", _DISPATCH) for m in (
        "torch.utils._python_dispatch", "torch.overrides", "torch.library", "torch._library",
        "torch._subclasses", "torch._custom_op", "torch._custom_ops", "torch._dispatch",
        "torch.testing._internal")},
}

# Exceptions inside a denied prefix: `triton.runtime.driver` gives device properties (the fused
# softmax tutorial uses it to size its grid) and reaches no kernel.
ALLOWED_INSIDE_DENIED = frozenset({"triton.runtime.driver"})

# Top-level module names that torch re-exports as attributes (`torch.os`, `torch.sys`, ...); an
# attribute chain through one of them is judged like an import of it. (`torch.cuda` is torch's
# own, so the kernel-library names are not part of this check.)
_REEXPORT_CHECK = frozenset(m for m, (_, why) in DENIED_IMPORTS.items()
                            if "." not in m and why != _OTHER_KERNELS)


def import_verdict(module: str) -> tuple[str, str] | None:
    """None if a solution may import `module`, else (reason, why)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in ALLOWED_INSIDE_DENIED:
            return None
        if prefix in DENIED_IMPORTS:
            return DENIED_IMPORTS[prefix]
    if parts[0] in ALLOWED_IMPORTS:
        return None
    return ("static:forbidden_import", "not on the list of modules a solution may import "
            f"({', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")


# --------------------------------------------------------------------------- call rules

_DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals",
                               "vars", "breakpoint", "input", "memoryview"})
_ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# Calls that read or write files, by qualified name.
_FILE_CALLS = frozenset({
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.loadtxt",
    "numpy.savetxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap", "numpy.fromregex",
    "numpy.lib.format.open_memmap", "torch.load", "torch.save", "torch.from_file",
    "torch.UntypedStorage.from_file", "torch.TypedStorage.from_file", "torch.Storage.from_file",
})
_FILE_METHODS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes", "tofile",
                           "from_file", "open", "readlines", "readline"})
# Global switches that change how the *reference* computes (precision, determinism, dtype).
_GLOBAL_STATE_PREFIXES = ("torch.set_", "torch.backends.", "torch.use_deterministic_algorithms",
                          "torch.cuda.set_", "torch.random.set_")
_GLOBAL_STATE_ALLOWED = frozenset({"torch.set_grad_enabled", "torch.set_printoptions"})
# Reseeding inside forward can make the verifier's "fresh" inputs predictable.
_RNG_CALLS = frozenset({"torch.manual_seed", "torch.seed", "torch.cuda.manual_seed",
                        "torch.cuda.manual_seed_all", "torch.random.manual_seed",
                        "torch.random.seed", "numpy.random.seed", "random.seed",
                        "torch.set_rng_state", "torch.cuda.set_rng_state"})
_DANGEROUS_DUNDER_DEFS = frozenset({
    "__torch_function__", "__torch_dispatch__", "__getattr__", "__getattribute__",
    "__setattr__", "__delattr__", "__del__", "__reduce__", "__reduce_ex__", "__array__",
    "__array_function__", "__array_ufunc__", "__instancecheck__", "__subclasscheck__",
    "__init_subclass__", "__class_getitem__", "__set_name__", "__get__", "__set__", "__delete__",
    "__new__", "__eq__", "__ne__", "__bool__", "__call__", "__getstate__", "__setstate__",
})
_SAFE_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__"})
_SAFE_DUNDER_NAMES = frozenset({"__name__", "__doc__", "__debug__"})
_TENSOR_BASES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase",
                           "torch.utils._python_dispatch.TorchDispatchMode",
                           "torch.overrides.TorchFunctionMode"})
# torch submodules a launcher may use that run no tensor compute.
_TORCH_SAFE_SUBMODULES = frozenset({"cuda", "backends", "version", "types", "amp", "autocast",
                                    "accelerator", "Size", "finfo", "iinfo", "dtype", "device",
                                    "random", "profiler", "testing", "utils"})
# Method names shared by tensors and Python containers/strings: `s.add(x)` on a set or
# `d.values()` on a dict must not count as PyTorch compute. The runtime census judges them.
_AMBIGUOUS_METHODS = frozenset({"add", "index", "indices", "sort", "values", "real", "imag",
                                "split", "count", "copy", "pop", "update", "clear", "remove",
                                "insert", "extend", "append", "get", "items", "keys", "format"})
_NUMPY_SCALAR_OK = frozenset({"prod", "dtype", "finfo", "iinfo", "result_type", "promote_types",
                              "float32", "float16", "int32", "int64"})
# nn.Module methods that run no forward compute (anything else called on an nn attribute counts
# as calling the module: `self.conv._conv_forward(x, w, b)` is a convolution).
_MODULE_BOOKKEEPING = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "state_dict", "load_state_dict", "train", "eval", "to", "cuda",
    "cpu", "half", "float", "double", "bfloat16", "type", "requires_grad_", "zero_grad",
    "extra_repr", "register_buffer", "register_parameter", "get_parameter", "get_buffer",
    "get_submodule",
})
# Decorators that make a function a Triton kernel (`@triton.heuristics` alone does not).
_KERNEL_MARKERS = frozenset({"triton.jit", "triton.autotune"})


def _dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None if the chain holds anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _root_name(node: ast.AST) -> str | None:
    """The Name at the root of an attribute/subscript/call chain (`torch` in torch.x[0].y())."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    names = [t.left, *t.comparators]
    has_name = any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)
    has_main = any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names)
    return has_name and has_main


def _walk_skip(node: ast.AST, skip: set[int]) -> Iterator[ast.AST]:
    """ast.walk that does not descend into nodes whose id is in `skip`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in skip:
            continue
        yield n
        stack.extend(reversed(list(ast.iter_child_nodes(n))))


# --------------------------------------------------------------------------- the analysis


@dataclass
class _AttrKind:
    kind: str  # "nn" | "local" | "kernel" | "torch" (an aliased torch callable) | "func"
    names: list[str]  # nn classes (for "nn": the module and any members), local class, kernel, qualified name
    node: ast.AST | None = None  # for "func": the lambda or function to follow


class _Analysis:
    def __init__(self, tree: ast.Module, policy: str, reference_names: set[str],
                 reference_classes: dict[str, str], extra_heavy_ops: frozenset[str]):
        self.tree = tree
        self.policy = policy
        self.extra = extra_heavy_ops
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, str]] = set()

        self.main_guard_nodes: set[int] = set()
        for stmt in tree.body:
            if _is_main_guard(stmt):
                self.main_guard_nodes.update(id(n) for n in ast.walk(stmt))

        self.aliases: dict[str, str] = {}
        self.star_imports: list[str] = []
        self._collect_imports()

        self.module_funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self._collect_defs(tree.body)
        self.defined_names = {n.name for n in ast.walk(tree)
                              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}

        self.kernels: dict[str, ast.AST] = {}  # name -> def (or the assignment making it)
        self.kernel_nodes: set[int] = set()
        self._collect_kernels()

        # Reference classes: "Model" always; the reference source's classes too. A same-named
        # class the candidate defines itself counts only if it is the reference copied verbatim.
        self.reference_names = set()
        for name in reference_names:
            own = self.classes.get(name)
            if own is None or name == "Model" or (
                    name in reference_classes and reference_classes[name] == _class_fingerprint(own)):
                self.reference_names.add(name)

        # Module-level names bound to torch callables, nn modules or helpers (`act = F.gelu`,
        # `_relu = nn.ReLU()`): a call through the name is judged like a call of what it holds.
        self.global_holders: dict[str, _AttrKind] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                k = self._value_kind(stmt.value)
                if k is not None and k.kind in ("nn", "torch", "func"):
                    self.global_holders[stmt.targets[0].id] = k

        self.global_kernel_holders: dict[str, set[str]] = {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                held = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and n.id in self.kernels}
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name) and held:
                        self.global_kernel_holders[t.id] = held

    # ----------------------------------------------------------------- collection

    def _collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name == "*":
                        self.star_imports.append(node.module)
                    else:
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _collect_defs(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.module_funcs[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
            elif isinstance(stmt, (ast.If, ast.With, ast.Try)) and id(stmt) not in self.main_guard_nodes:
                for sub in ("body", "orelse", "finalbody"):
                    self._collect_defs(getattr(stmt, sub, []) or [])
                for h in getattr(stmt, "handlers", []) or []:
                    self._collect_defs(h.body)

    def qualify(self, node: ast.AST) -> str | None:
        """Qualified name of a Name/Attribute chain rooted at an import alias, else None."""
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    def _decorator_names(self, fn: ast.AST) -> list[str]:
        out = []
        for d in getattr(fn, "decorator_list", []):
            target = d.func if isinstance(d, ast.Call) else d
            q = self.qualify(target)
            if q:
                out.append(q)
        return out

    def _collect_kernels(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(q in _KERNEL_MARKERS for q in self._decorator_names(node)):
                    self.kernels.setdefault(node.name, node)
                    self.kernel_nodes.add(id(node))
        # kernel = triton.jit(fn)  /  kernel = triton.autotune(...)(triton.jit(fn))
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
                if any(self.qualify(c.func) in _KERNEL_MARKERS for c in calls):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.kernels.setdefault(t.id, node)
                    for c in calls:
                        for a in c.args:
                            if isinstance(a, ast.Name) and a.id in self.module_funcs:
                                self.kernel_nodes.add(id(self.module_funcs[a.id]))

    # ----------------------------------------------------------------- findings

    def add(self, reason: str, node: ast.AST | int, message: str, flag: str | None = None) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        key = (flag or reason, line, message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(reason=reason, line=line, message=message, flag=flag))

    # ----------------------------------------------------------------- module-wide checks

    def check_module(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) \
                    and id(node) not in self.main_guard_nodes:
                self.add("static:try_except_fallback", node,
                         "`try` statement: a try/except can hide a failing kernel behind a fallback; "
                         "solutions must not catch errors (remove the try)", "try_except_fallback")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self._check_import(a.name, node)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    self.add("static:forbidden_import", node,
                             "relative import: a solution is one self-contained module",
                             "forbidden_import:relative")
                elif node.module:
                    if all(f"{node.module}.{a.name}" in ALLOWED_INSIDE_DENIED for a in node.names):
                        continue  # from triton.runtime import driver
                    if not self._check_import(node.module, node):
                        for a in node.names:
                            if a.name != "*":
                                self._check_import(f"{node.module}.{a.name}", node, submodule_only=True)
            elif isinstance(node, ast.Call):
                self._check_call_security(node)
            elif isinstance(node, ast.Attribute):
                self._check_attribute(node)
            elif isinstance(node, ast.Name):
                self._check_name(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._check_assignment(node)
            elif isinstance(node, ast.ClassDef):
                self._check_class(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in _DANGEROUS_DUNDER_DEFS:
                    self.add("static:monkeypatch", node,
                             f"defines `{node.name}`: overriding this hook can change how the "
                             "verifier calls or compares the model", f"monkeypatch:def {node.name}")
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    ctx = item.context_expr
                    target = ctx.func if isinstance(ctx, ast.Call) else ctx
                    q = self.qualify(target) or ""
                    if q.endswith("suppress"):
                        self.add("static:try_except_fallback", node,
                                 f"`with {q}(...)` swallows exceptions like a try/except",
                                 "try_except_fallback")
        self._check_reference_model()

    def _check_import(self, module: str, node: ast.AST, submodule_only: bool = False) -> bool:
        verdict = import_verdict(module)
        if verdict is None:
            return False
        if submodule_only and verdict[1].startswith("not on the list"):
            return False  # `from torch import matmul`: matmul is a name, not a module
        reason, why = verdict
        what = reason.split(":", 1)[1]
        self.add(reason, node, f"import of `{module}` ({why})", f"{what}:{module}")
        return True

    def _check_name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__") and name.endswith("__") and name not in _SAFE_DUNDER_NAMES:
            if name == "__file__":
                self.add("static:file_access", node, "`__file__` used: solutions must not locate "
                         "or read files", "file_access:__file__")
            elif name == "__import__":
                self.add("static:dynamic_code", node, "`__import__` used: imports must be plain "
                         "import statements", "dynamic_code:__import__")
            else:
                self.add("static:introspection", node, f"`{name}` used: interpreter internals are "
                         "off limits to a solution", f"introspection:{name}")

    def _check_attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in _SAFE_DUNDER_ATTRS:
            self.add("static:introspection", node, f"dunder attribute `.{attr}`: introspection "
                     "or patching through interpreter internals", f"introspection:{attr}")
        q = self.qualify(node)
        if not q:
            return
        parts = q.split(".")
        if any(".".join(parts[:i]) in ALLOWED_INSIDE_DENIED for i in range(2, len(parts) + 1)):
            return
        # A chain through a denied module (torch.os.system, torch._dynamo.disable, triton.runtime.jit ...).
        for i in range(2, len(parts) + 1):
            prefix = ".".join(parts[:i])
            comp = parts[i - 1]
            hit = DENIED_IMPORTS.get(prefix)
            if hit is None and i >= 2 and comp in _REEXPORT_CHECK and parts[0] in ("torch", "triton", "numpy"):
                hit = DENIED_IMPORTS[comp]
            if hit is not None:
                reason, why = hit
                self.add(reason, node, f"`{prefix}` used ({why})", f"{reason.split(':', 1)[1]}:{prefix}")
                return
        if q == "torch.compile" or q.startswith("torch.compile."):
            self.add("static:forbidden_import", node, f"`{q}` used ({_COMPILE})",
                     "forbidden_import:torch.compile")
            return
        if parts[0] in ("torch", "triton") and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            self.add("static:introspection", node, f"private internals `{q}` used",
                     f"introspection:{q}")

    def _check_call_security(self, node: ast.Call) -> None:
        func = node.func
        q = self.qualify(func)
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            name = func.id
            if name in _DYNAMIC_BUILTINS:
                self.add("static:dynamic_code", node, f"`{name}(...)` runs or exposes code "
                         "dynamically", f"dynamic_code:{name}")
            elif name == "open":
                self.add("static:file_access", node, "`open(...)`: solutions must not read or "
                         "write files", "file_access:open")
            elif name in _ATTR_BUILTINS:
                self._check_attr_builtin(name, node)
            elif name == "type" and len(node.args) == 3:
                self.add("static:dynamic_code", node, "`type(name, bases, dict)` builds a class "
                         "dynamically", "dynamic_code:type")
        if q:
            if q in _FILE_CALLS or q.startswith(("numpy.lib.format", "torch.serialization")):
                self.add("static:file_access", node, f"`{q}(...)` reads or writes files",
                         f"file_access:{q}")
            elif q.startswith(_GLOBAL_STATE_PREFIXES) and q not in _GLOBAL_STATE_ALLOWED \
                    and id(node) not in self.main_guard_nodes:
                self.add("static:monkeypatch", node, f"`{q}(...)` changes global PyTorch state "
                         "(it would change how the reference computes too)", f"monkeypatch:{q}")
            elif q in ("operator.attrgetter", "operator.methodcaller"):
                self.add("static:dynamic_code", node, f"`{q}` looks attributes up by string",
                         f"dynamic_code:{q}")
            elif q.startswith(("threading.", "_thread.", "multiprocessing.", "concurrent.",
                               "torch.multiprocessing.")):
                self.add("static:threads", node, f"`{q}(...)` starts threads or processes",
                         f"threads:{q}")
        if isinstance(func, ast.Attribute) and func.attr in _FILE_METHODS and q is None:
            root = _root_name(func)
            if root != "self":
                self.add("static:file_access", node, f"`.{func.attr}(...)`: solutions must not "
                         "read or write files", f"file_access:{func.attr}")

    def _is_module_ref(self, node: ast.AST) -> bool:
        root = _root_name(node)
        return root is not None and root in self.aliases

    def _check_attr_builtin(self, name: str, node: ast.Call) -> None:
        if len(node.args) < 2:
            return
        target, key = node.args[0], node.args[1]
        on_module = self._is_module_ref(target)
        label = ast.unparse(target) if hasattr(ast, "unparse") else "object"
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            if on_module and name in ("setattr", "delattr"):
                self.add("static:monkeypatch", node, f"`{name}` on module `{label}`",
                         f"monkeypatch:{name}")
            else:
                self.add("static:dynamic_code", node, f"`{name}` with a computed attribute name "
                         "(use a plain attribute)", f"dynamic_code:{name}")
            return
        attr = key.value
        if attr.startswith("__") and attr.endswith("__"):
            self.add("static:introspection", node, f"`{name}(..., {attr!r})` reaches interpreter "
                     "internals", f"introspection:{attr}")
        elif on_module:
            if name in ("setattr", "delattr"):
                self.add("static:monkeypatch", node, f"`{name}({label}, {attr!r}, ...)` patches a "
                         "module", f"monkeypatch:{self.qualify(target) or label}.{attr}")
            else:
                self.add("static:dynamic_code", node, f"`{name}({label}, {attr!r})` looks a module "
                         "attribute up by string (write it out)", f"dynamic_code:{name}")

    def _check_assignment(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            targets = [node.target]  # AugAssign / AnnAssign
        flat: list[ast.AST] = []
        for t in targets:
            flat.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
        for t in flat:
            if not isinstance(t, (ast.Attribute, ast.Subscript)):
                continue
            root = _root_name(t)
            text = ast.unparse(t)
            if root in self.aliases:
                what = (self.qualify(t) if isinstance(t, ast.Attribute) else None) or text
                self.add("static:monkeypatch", node, f"assignment to `{text}` patches the imported "
                         f"module `{self.aliases[root]}`", f"monkeypatch:{what}")
            elif isinstance(t, ast.Attribute) and t.attr in ("forward", "__call__", "_call_impl"):
                self.add("static:monkeypatch", node, f"assignment to `{text}` replaces the method the "
                         "verifier calls", "monkeypatch:forward_reassigned")
            elif root in self.classes and isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                self.add("static:monkeypatch", node, f"assignment to `{text}` patches class "
                         f"`{root}` from outside its body", f"monkeypatch:{text}")

    def _check_class(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            q = self.qualify(b)
            if q in _TENSOR_BASES:
                self.add("static:monkeypatch", node, f"class `{node.name}` subclasses `{q}`: tensor "
                         "subclasses and dispatch modes can change what ops and comparisons do",
                         "monkeypatch:tensor_subclass")
        if node.name == "ModelNew":
            for stmt in node.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    if any(isinstance(t, ast.Name) and t.id in ("forward", "__call__") for t in targets):
                        self.add("static:monkeypatch", stmt, "`forward` bound by assignment in "
                                 "ModelNew: define it with `def forward(self, ...)`",
                                 "monkeypatch:forward_reassigned")

    def _check_reference_model(self) -> None:
        if not self.reference_names:
            return
        own_class_nodes: set[int] = set()
        for name in self.reference_names:
            cls = self.classes.get(name)
            if cls is not None:
                own_class_nodes.update(id(n) for n in ast.walk(cls) if n is not cls)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in self.reference_names \
                    and isinstance(node.ctx, ast.Load) and id(node) not in self.main_guard_nodes \
                    and id(node) not in own_class_nodes:
                self.add("static:reference_model_used", node, f"the reference class `{node.id}` is "
                         "used (subclassed, instantiated or called): the solution must compute "
                         "with its own Triton kernels", f"reference_model_used:{node.id}")

    # ----------------------------------------------------------------- ModelNew and reachability

    def model_class(self) -> ast.ClassDef | None:
        found = None
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == "ModelNew":
                found = stmt
        return found

    def class_chain(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """The class and its module-local bases, nearest first (a simple MRO)."""
        out, todo, seen = [], [cls], set()
        while todo:
            c = todo.pop(0)
            if c.name in seen:
                continue
            seen.add(c.name)
            out.append(c)
            for b in c.bases:
                if isinstance(b, ast.Name) and b.id in self.classes:
                    todo.append(self.classes[b.id])
        return out

    def methods(self, cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for c in reversed(self.class_chain(cls)):
            for stmt in c.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[stmt.name] = stmt
        return out

    def attr_kinds(self, cls: ast.ClassDef) -> dict[str, _AttrKind]:
        """`self.attr = ...` in any method -> what the attribute holds, when it can be told."""
        kinds: dict[str, _AttrKind] = {}
        for c in self.class_chain(cls):
            for fn in c.body:
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                        continue
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "self" and t.attr not in kinds):
                            k = self._value_kind(node.value)
                            if k:
                                kinds[t.attr] = k
        return kinds

    def _value_kind(self, value: ast.AST) -> _AttrKind | None:
        if isinstance(value, ast.Name) and value.id in self.kernels:
            return _AttrKind("kernel", [value.id])
        if isinstance(value, ast.Lambda):
            return _AttrKind("func", ["lambda"], value)
        if isinstance(value, ast.Name) and value.id in self.module_funcs:
            return _AttrKind("func", [value.id], self.module_funcs[value.id])
        if isinstance(value, (ast.Name, ast.Attribute)):
            q = self.qualify(value)
            return _AttrKind("torch", [q]) if q else None
        if not isinstance(value, ast.Call):
            return None
        if isinstance(value.func, ast.Name) and value.func.id in self.classes:
            return _AttrKind("local", [value.func.id])
        q = self.qualify(value.func) or ""
        if q.startswith("torch.nn.") and q.count(".") == 2 and q.split(".")[2][:1].isupper():
            names = [q.split(".")[2]]
            locals_ = []
            for sub in ast.walk(value):
                if sub is value or not isinstance(sub, ast.Call):
                    continue
                sq = self.qualify(sub.func) or ""
                if sq.startswith("torch.nn.") and sq.count(".") == 2 and sq.split(".")[2][:1].isupper():
                    names.append(sq.split(".")[2])
                elif isinstance(sub.func, ast.Name) and sub.func.id in self.classes:
                    locals_.append(sub.func.id)
            kind = _AttrKind("nn", names)
            kind.names += [f"local:{n}" for n in locals_]
            return kind
        return None


def _class_fingerprint(cls: ast.ClassDef) -> str:
    return ast.dump(ast.Module(body=cls.body, type_ignores=[]), include_attributes=False)


class _Reach:
    """Follows forward through methods, helper classes and module-level functions, collecting
    kernel launches and judging PyTorch compute on the way."""

    def __init__(self, an: _Analysis, model: ast.ClassDef):
        self.an = an
        self.model = model
        self.methods = an.methods(model)
        self.attrs = an.attr_kinds(model)
        self.queue: list[tuple[str, ast.AST, dict[str, ast.AST], dict[str, _AttrKind]]] = []
        self.done: set[int] = set()
        self.launched: list[str] = []
        self.kernel_refs: list[str] = []
        self.generic_launches = 0
        self.functions: list[str] = []
        # `helper.softmax(x)` on an instance of a module-local class is not Tensor.softmax. Only
        # methods count here: a module-level `def softmax` does not make `x.softmax()` Triton.
        self.local_method_names = {f.name for c in ast.walk(an.tree) if isinstance(c, ast.ClassDef)
                                   for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def enqueue(self, label: str, fn: ast.AST, methods: dict, attrs: dict) -> None:
        if id(fn) in self.done or id(fn) in self.an.kernel_nodes:
            return
        self.done.add(id(fn))
        self.queue.append((label, fn, methods, attrs))

    def enqueue_class(self, cls_name: str, which: Iterable[str]) -> None:
        cls = self.an.classes.get(cls_name)
        if cls is None:
            return
        methods = self.an.methods(cls)
        attrs = self.an.attr_kinds(cls)
        for m in which:
            if m in methods:
                self.enqueue(f"{cls_name}.{m}", methods[m], methods, attrs)

    def run(self) -> None:
        for root in ("forward", "__call__"):
            if root in self.methods:
                self.enqueue(f"ModelNew.{root}", self.methods[root], self.methods, self.attrs)
        for d in self.model.decorator_list:
            for n in ast.walk(d):
                if isinstance(n, ast.Name) and n.id in self.an.module_funcs:
                    self.enqueue(n.id, self.an.module_funcs[n.id], {}, {})
        while self.queue:
            label, fn, methods, attrs = self.queue.pop(0)
            self.functions.append(label)
            self.visit(label, fn, methods, attrs)
        if not self.launched and self.kernel_refs and self.generic_launches:
            self.launched = list(dict.fromkeys(self.kernel_refs))

    def _launch(self, name: str) -> None:
        if name not in self.launched:
            self.launched.append(name)

    def visit(self, label: str, fn: ast.AST, methods: dict, attrs: dict) -> None:
        an = self.an
        for node in _walk_skip(fn, an.kernel_nodes - {id(fn)}):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in an.kernels:
                    self.kernel_refs.append(node.id)
                elif node.id in an.global_kernel_holders:
                    self.kernel_refs.extend(sorted(an.global_kernel_holders[node.id]))
                elif node.id in an.module_funcs:
                    self.enqueue(node.id, an.module_funcs[node.id], {}, {})
                elif node.id in an.classes:
                    self.enqueue_class(node.id, ("__init__", "forward", "__call__"))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = node.value.id
                if base in ("self", "cls") and node.attr in methods:
                    self.enqueue(f"{label.split('.')[0]}.{node.attr}", methods[node.attr], methods, attrs)
                elif base in ("self", "cls") and node.attr in an.kernels:
                    self.kernel_refs.append(node.attr)
                elif base in an.classes:
                    self.enqueue_class(base, (node.attr,) if node.attr != "apply" else ("forward",))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "self":
                k = attrs.get(node.value.attr)
                if k and k.kind == "local":
                    self.enqueue_class(k.names[0], (node.attr,))
            if isinstance(node, ast.Call):
                self.visit_call(label, node, attrs)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) \
                    or isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
                if not pol.op_allowed(an.policy, "matmul", an.extra):
                    self.compute(node, label, "@", "the `@` operator runs torch.matmul")
            elif isinstance(node, ast.For):
                self.visit_for(label, node, attrs)

    def visit_for(self, label: str, node: ast.For, attrs: dict) -> None:
        """`for layer in self.layers: x = layer(x)` calls every module in the container."""
        held = [n.attr for n in ast.walk(node.iter) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr in attrs]
        if not held:
            return
        loop_vars = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in loop_vars:
                for attr in held:
                    self.call_attr(label, sub, attr, attrs)

    def call_attr(self, label: str, node: ast.Call, attr: str, attrs: dict) -> None:
        k = attrs.get(attr)
        if k is None:
            return
        if k.kind == "local":
            self.enqueue_class(k.names[0], ("forward", "__call__"))
        elif k.kind == "kernel":
            self._launch(k.names[0])
        elif k.kind == "func" and k.node is not None:
            self.enqueue(f"{label}: self.{attr}", k.node, self.methods, attrs)
        elif k.kind == "torch":
            self.judge_qualified(label, node, k.names[0])
        elif k.kind == "nn":
            for name in k.names:
                if name.startswith("local:"):
                    self.enqueue_class(name[len("local:"):], ("forward", "__call__"))
                elif not pol.nn_module_allowed(self.an.policy, name, self.an.extra):
                    self.compute(node, label, f"torch.nn.{name}",
                                 f"`self.{attr}` ({name}) is called")

    def visit_call(self, label: str, node: ast.Call, attrs: dict) -> None:
        an = self.an
        func = node.func
        # kernel[grid](...) and direct kernel calls
        if isinstance(func, ast.Subscript):
            target = func.value
            if isinstance(target, ast.Name) and target.id in an.kernels:
                self._launch(target.id)
            elif isinstance(target, ast.Attribute) and target.attr in an.kernels:
                self._launch(target.attr)
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id == "self" and target.attr in attrs):
                self.call_attr(label, node, target.attr, attrs)  # self.layers[i](x)
            else:
                self.generic_launches += 1
            return
        if isinstance(func, ast.Name) and func.id in an.kernels:
            self._launch(func.id)
            return
        if isinstance(func, ast.Name) and func.id in an.global_holders:
            self.call_attr(label, node, func.id, an.global_holders)
            return
        # self.attr(...) / self.attr.forward(...) / self.conv._conv_forward(...)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in attrs and func.attr not in self.methods:
                self.call_attr(label, node, func.attr, attrs)
            return
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"
                and func.value.attr in attrs and attrs[func.value.attr].kind == "nn"):
            if func.attr not in _MODULE_BOOKKEEPING:
                self.call_attr(label, node, func.value.attr, attrs)
            return
        if id(node) in an.main_guard_nodes:
            return
        q = an.qualify(func)
        if q is not None:
            self.judge_qualified(label, node, q)
            return
        if isinstance(func, ast.Name) and an.star_imports and func.id not in an.defined_names \
                and not hasattr(builtins, func.id):
            for mod in an.star_imports:
                if mod in ("torch", "torch.nn.functional"):
                    self.judge_qualified(label, node, f"{mod}.{func.id}")
            return
        if isinstance(func, ast.Attribute):
            self.judge_method(label, node, func)

    def judge_qualified(self, label: str, node: ast.Call, q: str) -> None:
        an, policy, extra = self.an, self.an.policy, self.an.extra
        parts = q.split(".")
        root = parts[0]
        if q in _RNG_CALLS:
            an.add("static:monkeypatch", node, f"`{q}(...)` in {label} reseeds the global RNG "
                   "during forward", f"monkeypatch:{q}")
            return
        if root == "numpy":
            if len(parts) == 2 and parts[1] in _NUMPY_SCALAR_OK:
                return
            an.add("static:host_compute", node, f"`{q}(...)` in {label}: numpy computes outside "
                   "Triton and outside the op census", f"host_compute:{q}")
            return
        if q in ("operator.matmul", "operator.imatmul"):
            if not pol.op_allowed(policy, "matmul", extra):
                self.compute(node, label, q, "operator.matmul runs torch.matmul")
            return
        if root != "torch" or len(parts) < 2:
            return
        sub = parts[1]
        if sub == "nn":
            if len(parts) == 3 and parts[2][:1].isupper():
                if not pol.nn_module_allowed(policy, parts[2], extra):
                    self.compute(node, label, q, f"builds and runs `{parts[2]}` inside forward")
                return
            if len(parts) == 4 and parts[2] == "functional":
                if not pol.functional_allowed(policy, parts[3], extra):
                    self.compute(node, label, q, "")
                return
            if len(parts) >= 3 and parts[2] in ("init", "utils"):
                if parts[2] == "init":
                    self.compute(node, label, q, "weight initialisation inside forward")
                return
            self.compute(node, label, q, "")
            return
        if sub == "ops" and len(parts) >= 4:
            op_name = ".".join(parts[2:])
            if not pol.runtime_op_allowed(policy, op_name, extra):
                self.compute(node, label, q, "a direct aten call")
            return
        if sub == "Tensor" and len(parts) == 3:
            self.judge_method_name(label, node, parts[2], q)
            return
        if len(parts) > 2 or sub in _TORCH_SAFE_SUBMODULES:
            if sub in _TORCH_SAFE_SUBMODULES:
                return
            self.compute(node, label, q, f"torch.{sub} runs PyTorch compute")
            return
        if sub[:1].isupper():
            return  # classes: torch.Size, torch.Generator, torch.FloatTensor(n) allocations
        if not pol.surface_allowed(policy, sub, extra):
            self.compute(node, label, q, "")

    def judge_method(self, label: str, node: ast.Call, func: ast.Attribute) -> None:
        recv = func.value
        if isinstance(recv, (ast.Constant, ast.JoinedStr, ast.List, ast.Dict, ast.Set, ast.Tuple,
                             ast.ListComp, ast.DictComp, ast.SetComp)):
            return
        if isinstance(recv, ast.Name) and (recv.id in ("self", "cls", "super") or recv.id in self.an.classes):
            return
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            return
        self.judge_method_name(label, node, func.attr, f"Tensor.{func.attr}")

    def judge_method_name(self, label: str, node: ast.Call, name: str, shown: str) -> None:
        policy = self.an.policy
        if name in pol.TENSOR_TO_HOST:
            self.an.add("static:host_compute", node, f"`.{name}()` in {label} moves tensor data into "
                        "Python/numpy, where compute escapes Triton and the op census",
                        f"host_compute:Tensor.{name}")
            return
        if name in _AMBIGUOUS_METHODS or name in self.local_method_names:
            return
        if name in pol.tensor_compute_methods(policy) and not pol.surface_allowed(policy, name, self.an.extra):
            self.compute(node, label, shown, "")

    def compute(self, node: ast.AST, label: str, what: str, why: str) -> None:
        extra = f" ({why})" if why else ""
        self.an.add("static:pytorch_compute", node,
                    f"`{what}` in {label}{extra}: PyTorch compute is not allowed under policy "
                    f"'{self.an.policy}'; do this work in a Triton kernel",
                    f"pytorch_compute:{what}")


# --------------------------------------------------------------------------- entry point


def _reference_classes(reference_source: str | None) -> tuple[set[str], dict[str, str]]:
    names = {"Model"}
    prints: dict[str, str] = {}
    if not reference_source:
        return names, prints
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = ast.parse(reference_source)
    except (SyntaxError, ValueError):
        return names, prints
    for stmt in ast.walk(ref):
        if isinstance(stmt, ast.ClassDef):
            names.add(stmt.name)
            prints[stmt.name] = _class_fingerprint(stmt)
    return names, prints


def _report(findings: list[Finding], kernels: list[str], launched: list[str],
            failure: Finding | None) -> StaticReport:
    findings = sorted(findings, key=lambda f: (f.line, f.reason))
    flags = list(dict.fromkeys(f.flag for f in findings if f.flag))
    all_items = ([failure] if failure else []) + findings
    detail = "\n".join(f"line {f.line}: {f.message}" if f.line else f.message for f in all_items)
    if failure is not None:
        reason = failure.reason
    elif flags:
        reason = next(f.reason for f in findings if f.flag)
    else:
        reason = "ok"
    if reason == "ok":
        detail = (f"ok: {len(kernels)} Triton kernel(s) ({', '.join(kernels)}); launched from "
                  f"forward: {', '.join(launched)}")
    return StaticReport(ok=reason == "ok", reason=reason, detail=detail, flags=flags,
                        kernels=kernels, launched=launched, findings=all_items)


def static_check(code: str, policy: str, reference_source: str | None = None,
                 extra_heavy_ops: Iterable[str] = ()) -> StaticReport:
    """Judge a candidate module without running it. `policy` is "strict" or "fusion" (resolve
    "auto" first with `policy.resolve_policy`); `reference_source` is the task's module, whose
    class names the candidate must not use; `extra_heavy_ops` extends fusion's heavy-op set."""
    if policy not in pol.POLICIES:
        raise ValueError(f"static_check: unknown policy {policy!r}; pass one of {pol.POLICIES} "
                         "(resolve 'auto' with tritonrl_lib.verify.policy.resolve_policy)")
    extra = frozenset(extra_heavy_ops)
    if not isinstance(code, str) or not code.strip():
        return _report([], [], [], Finding("static:syntax_error", 0, "empty module: no code to check"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except SyntaxError as e:
        msg = f"{type(e).__name__}: {e.msg}"
        return _report([], [], [], Finding("static:syntax_error", e.lineno or 0, msg))
    except (ValueError, RecursionError, MemoryError) as e:
        return _report([], [], [], Finding("static:syntax_error", 0, f"cannot parse: {e}"))

    ref_names, ref_prints = _reference_classes(reference_source)
    try:
        an = _Analysis(tree, policy, ref_names, ref_prints, extra)
        an.check_module()
        kernels = list(an.kernels)
        model = an.model_class()
        failure = None
        launched: list[str] = []
        if model is None:
            assigned = any(isinstance(n, ast.Name) and n.id == "ModelNew" and isinstance(n.ctx, ast.Store)
                           for n in ast.walk(tree))
            how = (" (it is assigned, not defined: write `class ModelNew(nn.Module):`)" if assigned
                   else ": the solution must define `class ModelNew(nn.Module)` at module level")
            failure = Finding("static:no_modelnew", 0, f"no class ModelNew{how}")
        elif "forward" not in an.methods(model):
            failure = Finding("static:no_forward", model.lineno,
                              "ModelNew has no `def forward(self, ...)`")
        elif not kernels:
            failure = Finding("static:no_triton_kernel", 0,
                              "no function decorated with @triton.jit or @triton.autotune: the "
                              "solution must implement its compute as Triton kernels")
        if model is not None and "forward" in an.methods(model):
            reach = _Reach(an, model)
            reach.run()
            launched = reach.launched
            if failure is None and not launched and not any(f.flag for f in an.findings):
                failure = Finding(
                    "static:kernel_unreachable", an.methods(model)["forward"].lineno,
                    f"kernel(s) {', '.join(kernels)} defined but none is launched from code "
                    f"ModelNew.forward reaches ({', '.join(reach.functions)}); launch one with "
                    "`kernel[grid](...)`")
            elif failure is None and not launched:
                an.add("static:kernel_unreachable", an.methods(model)["forward"].lineno,
                       f"no Triton kernel is launched from code ModelNew.forward reaches "
                       f"({', '.join(reach.functions)})")
        return _report(an.findings, kernels, launched, failure)
    except RecursionError:
        return _report([], [], [], Finding("static:syntax_error", 0,
                                           "module too deeply nested to analyse"))
