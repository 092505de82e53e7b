"""The static check's security rules, over the whole module: nothing a solution may not import,
reach or call (imports, attribute chains through allowed modules, files, threads, dynamic code,
introspection, try/except fallbacks, the reference's own classes). Patching and class tricks are
patching.py's. Each finding is a cheat flag with the line that raised it.

Attribute chains are judged by what they really reach (resolve.py): `logging.sys`,
`enum.bltns.exec` or `torch.cuda.tunable.mp` count like importing sys, builtins or
multiprocessing, whatever alias or re-bound name they start from.
"""

from __future__ import annotations

import ast

from .. import reasons as R
from .facts import ModuleFacts, root_name
from .patching import check_class, check_def, check_setattr, check_store
from .resolve import MISSING, home_name, is_module
from .rules import (ALLOWED_INSIDE_DENIED, COMPILE_WHY, DENIED_BUILTINS, DENIED_IMPORTS, FILE_CALLS,
                    FILE_METHODS, GLOBAL_STATE_ALLOWED, GLOBAL_STATE_PREFIXES, INTROSPECTION_ATTRS,
                    REEXPORT_CHECK, SAFE_DUNDER_ATTRS, SAFE_DUNDER_NAMES, TENSOR_SUBCLASS_ATTRS,
                    denied_callable, import_verdict)


def check_module(an: ModuleFacts) -> None:
    for node in an.index.of(ast.Try, getattr(ast, "TryStar", ast.Try), ast.Import, ast.ImportFrom, ast.Call,
                            ast.Attribute, ast.Subscript, ast.Name, ast.ClassDef, ast.FunctionDef,
                            ast.AsyncFunctionDef, ast.With, ast.AsyncWith):
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) \
                and id(node) not in an.main_guard_nodes:
            an.add(R.static("try_except_fallback"), node,
                   "`try` statement: a try/except can hide a failing kernel behind a fallback; "
                   "solutions must not catch errors (remove the try)", "try_except_fallback")
        elif isinstance(node, ast.Import):
            for a in node.names:
                _check_import(an, a.name, node)
        elif isinstance(node, ast.ImportFrom):
            _check_import_from(an, node)
        elif isinstance(node, ast.Call):
            _check_call_security(an, node)
        elif isinstance(node, ast.Attribute):
            _check_attribute(an, node)
            if not isinstance(node.ctx, ast.Load):
                check_store(an, node)
            elif id(node) in an.value_positions:
                _check_module_value(an, node)
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            check_store(an, node)
        elif isinstance(node, ast.Name):
            _check_name(an, node)
            if id(node) in an.value_positions:
                _check_module_value(an, node)
        elif isinstance(node, ast.ClassDef):
            check_class(an, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            check_def(an, node)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                ctx = item.context_expr
                target = ctx.func if isinstance(ctx, ast.Call) else ctx
                q = an.canonical(target) or ""
                if q.endswith("suppress"):
                    an.add(R.static("try_except_fallback"), node,
                           f"`with {q}(...)` swallows exceptions like a try/except",
                           "try_except_fallback")
    _check_reference_model(an)
    _check_kernel_bodies(an)


def _flag(an: ModuleFacts, node: ast.AST, reason: str, written: str, message: str) -> None:
    an.add(reason, node, message, f"{reason.split(':', 1)[1]}:{written}")


def _check_import(an: ModuleFacts, module: str, node: ast.AST, submodule_only: bool = False) -> bool:
    verdict = import_verdict(module)
    if verdict is None:
        return False
    if submodule_only and verdict[1].startswith("not on the list"):
        return False  # `from torch import matmul`: matmul is a name, not a module
    reason, why = verdict
    _flag(an, node, reason, module, f"import of `{module}` ({why})")
    return True


def _check_import_from(an: ModuleFacts, node: ast.ImportFrom) -> None:
    if node.level:
        an.add(R.static("forbidden_import"), node, "relative import: a solution is one self-contained module",
               "forbidden_import:relative")
        return
    if not node.module:
        return
    if all(f"{node.module}.{a.name}" in ALLOWED_INSIDE_DENIED for a in node.names):
        return  # from triton.runtime import driver
    if _check_import(an, node.module, node):
        return
    for a in node.names:
        if a.name != "*" and not _check_import(an, f"{node.module}.{a.name}", node, submodule_only=True):
            _check_chain(an, f"{node.module}.{a.name}", node)  # from enum import bltns


def _check_chain(an: ModuleFacts, q: str, node: ast.AST, how: str | None = None) -> bool:
    """Flags the chain if it reaches a module, builtin or function the rules refuse. `how`: how
    the chain is written, when not as itself."""
    hit = an.resolver.judge(q)
    if hit is not None:
        used = how or f"`{hit.written}`"
        real = "" if hit.target == hit.written else f", which is `{hit.target}`,"
        _flag(an, node, hit.reason, hit.written, f"{used}{real} used ({hit.why}): a module or function a "
              "solution may not import, under any name")
        return True
    canonical = an.resolver.canonical(q)
    obj = an.resolver.obj(q)
    denied = denied_callable(canonical, home_name(obj) if obj is not MISSING else None)
    if denied is not None:
        key, reason, why = denied
        _flag(an, node, reason, key.rstrip("._"), f"`{q}` used ({why})")
        return True
    return False


def _check_name(an: ModuleFacts, node: ast.Name) -> None:
    name = node.id
    if name.startswith("__") and name.endswith("__") and name not in SAFE_DUNDER_NAMES:
        if name == "__file__":
            an.add(R.static("file_access"), node, "`__file__` used: solutions must not locate "
                   "or read files", "file_access:__file__")
        elif name == "__import__":
            an.add(R.static("dynamic_code"), node, "`__import__` used: imports must be plain "
                   "import statements", "dynamic_code:__import__")
        else:
            an.add(R.static("introspection"), node, f"`{name}` used: interpreter internals are "
                   "off limits to a solution", f"introspection:{name}")
    elif (name in DENIED_BUILTINS and isinstance(node.ctx, ast.Load) and name not in an.bound
          and id(node) not in an.call_funcs):
        reason, why = DENIED_BUILTINS[name]
        _flag(an, node, reason, name, f"the builtin `{name}` passed around as a value ({why})")
    elif isinstance(node.ctx, ast.Load) and name in an.aliases and an.aliases[name] != name:
        _check_chain(an, an.aliases[name], node)  # a name re-bound at module level: s = logging.sys
    elif isinstance(node.ctx, ast.Load) and name in an.star_names and name not in an.bound:
        module = an.star_names[name]  # `from torch.nn.functional import *` binds `importlib` too
        _check_chain(an, f"{module}.{name}", node, f"`{name}` (bound by `from {module} import *`)")


def _check_attribute(an: ModuleFacts, node: ast.Attribute) -> None:
    attr = node.attr
    original = an.constant_getattrs.get(id(node))
    if original is not None:
        _check_constant_getattr(an, original)
    if attr.startswith("__") and attr.endswith("__") and attr not in SAFE_DUNDER_ATTRS:
        an.add(R.static("introspection"), node, f"dunder attribute `.{attr}`: introspection "
               "or patching through interpreter internals", f"introspection:{attr}")
    elif attr in INTROSPECTION_ATTRS:
        an.add(R.static("introspection"), node, f"attribute `.{attr}`: frames, code objects and raw "
               "memory are interpreter internals, off limits to a solution", f"introspection:{attr}")
    elif attr in TENSOR_SUBCLASS_ATTRS:
        an.add(R.static("monkeypatch"), node, f"`.{attr}` makes a tensor of another class, which can "
               "change what ops and comparisons do", "monkeypatch:tensor_subclass")
    q = an.qualify(node)
    for candidate in [q] if q else an.bindings.qualify_any(node):
        _check_qualified_attribute(an, node, candidate)


def _check_qualified_attribute(an: ModuleFacts, node: ast.Attribute, q: str) -> None:
    parts = q.split(".")
    if any(".".join(parts[:i]) in ALLOWED_INSIDE_DENIED for i in range(2, len(parts) + 1)):
        return
    if _check_chain(an, q, node):
        return
    # By name, where the chain could not be followed: a denied prefix (torch._dynamo.disable), or
    # a component named like a denied top-level module past the point the walk reached.
    steps, rest = an.resolver.walk(q)
    resolved = len(steps)
    for i in range(2, len(parts) + 1):
        prefix = ".".join(parts[:i])
        hit = DENIED_IMPORTS.get(prefix)
        if hit is None and i > resolved and parts[i - 1] in REEXPORT_CHECK:
            hit = DENIED_IMPORTS[parts[i - 1]]
        if hit is not None:
            reason, why = hit
            _flag(an, node, reason, prefix, f"`{prefix}` used ({why})")
            return
    canonical = an.resolver.canonical(q)
    if canonical == "torch.compile" or canonical.startswith("torch.compile."):
        _flag(an, node, R.static("forbidden_import"), "torch.compile", f"`{q}` used ({COMPILE_WHY})")
        return
    if canonical.split(".")[0] in ("torch", "triton") and \
            any(p.startswith("_") and not p.startswith("__") for p in canonical.split(".")[1:]):
        an.add(R.static("introspection"), node, f"private internals `{q}` used", f"introspection:{q}")


def _check_module_value(an: ModuleFacts, node: ast.Name | ast.Attribute) -> None:
    """A module passed around as a value (an argument, a return value, a container element, a
    default): what is done with it later is out of the rules' sight."""
    q = an.qualify(node)
    for chain in [q] if q else an.bindings.qualify_any(node):
        if is_module(an.resolver.obj(chain)):
            an.add(R.static("dynamic_code"), node, f"the module `{ast.unparse(node)}` is passed around as a "
                   "value: use its attributes directly", "dynamic_code:module_value")
            return


def _check_constant_getattr(an: ModuleFacts, node: ast.Call) -> None:
    """A constant-name getattr is judged as the attribute it reads (`_check_attribute`); on a
    module it is also an attribute looked up by string, which plain code never needs."""
    target, attr = node.args[0], node.args[1].value
    if attr.startswith("__") and attr.endswith("__"):
        return  # the dunder rule flags the attribute itself
    if an.qualify(target) or an.bindings.qualify_any(target):
        label = ast.unparse(target)
        an.add(R.static("dynamic_code"), node, f"`getattr({label}, {attr!r})` looks a module attribute "
               "up by string (write it out)", "dynamic_code:getattr")


def _check_call_security(an: ModuleFacts, node: ast.Call) -> None:
    func = node.func
    if isinstance(func, ast.Name) and func.id not in an.aliases and func.id not in an.defined_names:
        name = func.id
        if name in ("getattr", "hasattr"):
            _check_dynamic_getattr(an, name, node)
        elif name in ("setattr", "delattr"):
            check_setattr(an, name, node)
        elif name in DENIED_BUILTINS:
            reason, why = DENIED_BUILTINS[name]
            text = ("`open(...)`: solutions must not read or write files" if name == "open"
                    else f"`{name}(...)` {why}")
            _flag(an, node, reason, name, text)
        elif name == "type" and len(node.args) == 3:
            an.add(R.static("dynamic_code"), node, "`type(name, bases, dict)` builds a class "
                   "dynamically", "dynamic_code:type")
    q = an.canonical(func)
    if q:
        if q in FILE_CALLS or q.startswith(("numpy.lib.format", "torch.serialization")):
            an.add(R.static("file_access"), node, f"`{q}(...)` reads or writes files",
                   f"file_access:{q}")
        elif q.startswith(GLOBAL_STATE_PREFIXES) and q not in GLOBAL_STATE_ALLOWED \
                and id(node) not in an.main_guard_nodes:
            an.add(R.static("monkeypatch"), node, f"`{q}(...)` changes global PyTorch state "
                   "(it would change how the reference computes too)", f"monkeypatch:{q}")
        elif q.startswith(("threading.", "_thread.", "multiprocessing.", "concurrent.",
                           "torch.multiprocessing.")):
            an.add(R.static("threads"), node, f"`{q}(...)` starts threads or processes",
                   f"threads:{q}")
    if isinstance(func, ast.Attribute) and func.attr in FILE_METHODS and q is None:
        root = root_name(func)
        if root != "self":
            an.add(R.static("file_access"), node, f"`.{func.attr}(...)`: solutions must not "
                   "read or write files", f"file_access:{func.attr}")


def _check_dynamic_getattr(an: ModuleFacts, name: str, node: ast.Call) -> None:
    """getattr/hasattr left after the constant-name rewrite: a computed name (or keywords)."""
    if len(node.args) < 2:
        return
    key = node.args[1]
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        if key.value.startswith("__") and key.value.endswith("__"):
            an.add(R.static("introspection"), node, f"`{name}(..., {key.value!r})` reaches interpreter "
                   "internals", f"introspection:{key.value}")
        return  # hasattr with a plain name; getattr was rewritten
    an.add(R.static("dynamic_code"), node, f"`{name}` with a computed attribute name "
           "(use a plain attribute)", f"dynamic_code:{name}")


def _check_kernel_bodies(an: ModuleFacts) -> None:
    """A Triton kernel's body is triton.language only. Under the interpreter it runs as Python,
    so numpy or torch called there (or in a plain function it calls), or the interpreter's own
    tensor handles, would compute on the host where nothing looks."""
    todo = [n for n in an.index.of(ast.FunctionDef, ast.AsyncFunctionDef) if id(n) in an.kernel_nodes]
    seen = {id(n) for n in todo}
    while todo:
        fn = todo.pop()
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and node.attr == "handle":
                an.add(R.static("introspection"), node, f"`.handle` in `{fn.name}`: the interpreter's own "
                       "tensor internals", "introspection:handle")
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id in an.module_funcs:
                callee = an.module_funcs[node.func.id]
                if id(callee) not in seen:
                    seen.add(id(callee))
                    todo.append(callee)
            q = an.canonical(node.func) or ""
            root = q.split(".")[0]
            if root in ("numpy", "torch"):
                reason = R.HOST_COMPUTE if root == "numpy" else R.PYTORCH_COMPUTE
                an.add(R.static(reason), node, f"`{q}(...)` in `{fn.name}`, called from a Triton kernel: a "
                       "kernel computes with triton.language only", f"{reason}:{q}")


def _check_reference_model(an: ModuleFacts) -> None:
    if not an.reference_names:
        return
    own_class_nodes: set[int] = set()
    for name in an.reference_names:
        cls = an.classes.get(name)
        if cls is not None:
            own_class_nodes.update(id(n) for n in ast.walk(cls) if n is not cls)
    for node in an.index.of(ast.Name):
        if node.id in an.reference_names \
                and isinstance(node.ctx, ast.Load) and id(node) not in an.main_guard_nodes \
                and id(node) not in own_class_nodes:
            an.add(R.static("reference_model_used"), node, f"the reference class `{node.id}` is "
                   "used (subclassed, instantiated or called): the solution must compute "
                   "with its own Triton kernels", f"reference_model_used:{node.id}")
