"""The static check's security rules, over the whole module: nothing a solution may not import,
touch or patch (imports, files, threads, dynamic code, introspection, monkeypatching, try/except
fallbacks, the reference's own classes). Each finding is a cheat flag with the line that raised it.
"""

from __future__ import annotations

import ast

from .. import reasons as R
from .facts import ModuleFacts, root_name
from .rules import (ALLOWED_INSIDE_DENIED, ATTR_BUILTINS, COMPILE_WHY, DANGEROUS_DUNDER_DEFS, DENIED_IMPORTS,
                    DYNAMIC_BUILTINS, FILE_CALLS, FILE_METHODS, GLOBAL_STATE_ALLOWED, GLOBAL_STATE_PREFIXES,
                    REEXPORT_CHECK, SAFE_DUNDER_ATTRS, SAFE_DUNDER_NAMES, TENSOR_BASES, import_verdict)


def check_module(an: ModuleFacts) -> None:
    for node in ast.walk(an.tree):
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) \
                and id(node) not in an.main_guard_nodes:
            an.add(R.static("try_except_fallback"), node,
                   "`try` statement: a try/except can hide a failing kernel behind a fallback; "
                   "solutions must not catch errors (remove the try)", "try_except_fallback")
        elif isinstance(node, ast.Import):
            for a in node.names:
                _check_import(an, a.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                an.add(R.static("forbidden_import"), node,
                       "relative import: a solution is one self-contained module",
                       "forbidden_import:relative")
            elif node.module:
                if all(f"{node.module}.{a.name}" in ALLOWED_INSIDE_DENIED for a in node.names):
                    continue  # from triton.runtime import driver
                if not _check_import(an, node.module, node):
                    for a in node.names:
                        if a.name != "*":
                            _check_import(an, f"{node.module}.{a.name}", node, submodule_only=True)
        elif isinstance(node, ast.Call):
            _check_call_security(an, node)
        elif isinstance(node, ast.Attribute):
            _check_attribute(an, node)
        elif isinstance(node, ast.Name):
            _check_name(an, node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            _check_assignment(an, node)
        elif isinstance(node, ast.ClassDef):
            _check_class(an, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in DANGEROUS_DUNDER_DEFS:
                an.add(R.static("monkeypatch"), node,
                       f"defines `{node.name}`: overriding this hook can change how the "
                       "verifier calls or compares the model", f"monkeypatch:def {node.name}")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                ctx = item.context_expr
                target = ctx.func if isinstance(ctx, ast.Call) else ctx
                q = an.qualify(target) or ""
                if q.endswith("suppress"):
                    an.add(R.static("try_except_fallback"), node,
                           f"`with {q}(...)` swallows exceptions like a try/except",
                           "try_except_fallback")
    _check_reference_model(an)

def _check_import(an: ModuleFacts, module: str, node: ast.AST, submodule_only: bool = False) -> bool:
    verdict = import_verdict(module)
    if verdict is None:
        return False
    if submodule_only and verdict[1].startswith("not on the list"):
        return False  # `from torch import matmul`: matmul is a name, not a module
    reason, why = verdict
    what = reason.split(":", 1)[1]
    an.add(reason, node, f"import of `{module}` ({why})", f"{what}:{module}")
    return True

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

def _check_attribute(an: ModuleFacts, node: ast.Attribute) -> None:
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__") and attr not in SAFE_DUNDER_ATTRS:
        an.add(R.static("introspection"), node, f"dunder attribute `.{attr}`: introspection "
               "or patching through interpreter internals", f"introspection:{attr}")
    q = an.qualify(node)
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
        if hit is None and i >= 2 and comp in REEXPORT_CHECK and parts[0] in ("torch", "triton", "numpy"):
            hit = DENIED_IMPORTS[comp]
        if hit is not None:
            reason, why = hit
            an.add(reason, node, f"`{prefix}` used ({why})", f"{reason.split(':', 1)[1]}:{prefix}")
            return
    if q == "torch.compile" or q.startswith("torch.compile."):
        an.add(R.static("forbidden_import"), node, f"`{q}` used ({COMPILE_WHY})",
               "forbidden_import:torch.compile")
        return
    if parts[0] in ("torch", "triton") and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
        an.add(R.static("introspection"), node, f"private internals `{q}` used",
               f"introspection:{q}")

def _check_call_security(an: ModuleFacts, node: ast.Call) -> None:
    func = node.func
    q = an.qualify(func)
    if isinstance(func, ast.Name) and func.id not in an.aliases:
        name = func.id
        if name in DYNAMIC_BUILTINS:
            an.add(R.static("dynamic_code"), node, f"`{name}(...)` runs or exposes code "
                   "dynamically", f"dynamic_code:{name}")
        elif name == "open":
            an.add(R.static("file_access"), node, "`open(...)`: solutions must not read or "
                   "write files", "file_access:open")
        elif name in ATTR_BUILTINS:
            _check_attr_builtin(an, name, node)
        elif name == "type" and len(node.args) == 3:
            an.add(R.static("dynamic_code"), node, "`type(name, bases, dict)` builds a class "
                   "dynamically", "dynamic_code:type")
    if q:
        if q in FILE_CALLS or q.startswith(("numpy.lib.format", "torch.serialization")):
            an.add(R.static("file_access"), node, f"`{q}(...)` reads or writes files",
                   f"file_access:{q}")
        elif q.startswith(GLOBAL_STATE_PREFIXES) and q not in GLOBAL_STATE_ALLOWED \
                and id(node) not in an.main_guard_nodes:
            an.add(R.static("monkeypatch"), node, f"`{q}(...)` changes global PyTorch state "
                   "(it would change how the reference computes too)", f"monkeypatch:{q}")
        elif q in ("operator.attrgetter", "operator.methodcaller"):
            an.add(R.static("dynamic_code"), node, f"`{q}` looks attributes up by string",
                   f"dynamic_code:{q}")
        elif q.startswith(("threading.", "_thread.", "multiprocessing.", "concurrent.",
                           "torch.multiprocessing.")):
            an.add(R.static("threads"), node, f"`{q}(...)` starts threads or processes",
                   f"threads:{q}")
    if isinstance(func, ast.Attribute) and func.attr in FILE_METHODS and q is None:
        root = root_name(func)
        if root != "self":
            an.add(R.static("file_access"), node, f"`.{func.attr}(...)`: solutions must not "
                   "read or write files", f"file_access:{func.attr}")

def _is_module_ref(an: ModuleFacts, node: ast.AST) -> bool:
    root = root_name(node)
    return root is not None and root in an.aliases

def _check_attr_builtin(an: ModuleFacts, name: str, node: ast.Call) -> None:
    if len(node.args) < 2:
        return
    target, key = node.args[0], node.args[1]
    on_module = _is_module_ref(an, target)
    label = ast.unparse(target) if hasattr(ast, "unparse") else "object"
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        if on_module and name in ("setattr", "delattr"):
            an.add(R.static("monkeypatch"), node, f"`{name}` on module `{label}`",
                   f"monkeypatch:{name}")
        else:
            an.add(R.static("dynamic_code"), node, f"`{name}` with a computed attribute name "
                   "(use a plain attribute)", f"dynamic_code:{name}")
        return
    attr = key.value
    if attr.startswith("__") and attr.endswith("__"):
        an.add(R.static("introspection"), node, f"`{name}(..., {attr!r})` reaches interpreter "
               "internals", f"introspection:{attr}")
    elif on_module:
        if name in ("setattr", "delattr"):
            an.add(R.static("monkeypatch"), node, f"`{name}({label}, {attr!r}, ...)` patches a "
                   "module", f"monkeypatch:{an.qualify(target) or label}.{attr}")
        else:
            an.add(R.static("dynamic_code"), node, f"`{name}({label}, {attr!r})` looks a module "
                   "attribute up by string (write it out)", f"dynamic_code:{name}")

def _check_assignment(an: ModuleFacts, node: ast.AST) -> None:
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
        root = root_name(t)
        text = ast.unparse(t)
        if root in an.aliases:
            what = (an.qualify(t) if isinstance(t, ast.Attribute) else None) or text
            an.add(R.static("monkeypatch"), node, f"assignment to `{text}` patches the imported "
                   f"module `{an.aliases[root]}`", f"monkeypatch:{what}")
        elif isinstance(t, ast.Attribute) and t.attr in ("forward", "__call__", "_call_impl"):
            an.add(R.static("monkeypatch"), node, f"assignment to `{text}` replaces the method the "
                   "verifier calls", "monkeypatch:forward_reassigned")
        elif root in an.classes and isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
            an.add(R.static("monkeypatch"), node, f"assignment to `{text}` patches class "
                   f"`{root}` from outside its body", f"monkeypatch:{text}")

def _check_class(an: ModuleFacts, node: ast.ClassDef) -> None:
    for b in node.bases:
        q = an.qualify(b)
        if q in TENSOR_BASES:
            an.add(R.static("monkeypatch"), node, f"class `{node.name}` subclasses `{q}`: tensor "
                   "subclasses and dispatch modes can change what ops and comparisons do",
                   "monkeypatch:tensor_subclass")
    if node.name == "ModelNew":
        for stmt in node.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(isinstance(t, ast.Name) and t.id in ("forward", "__call__") for t in targets):
                    an.add(R.static("monkeypatch"), stmt, "`forward` bound by assignment in "
                           "ModelNew: define it with `def forward(self, ...)`",
                           "monkeypatch:forward_reassigned")

def _check_reference_model(an: ModuleFacts) -> None:
    if not an.reference_names:
        return
    own_class_nodes: set[int] = set()
    for name in an.reference_names:
        cls = an.classes.get(name)
        if cls is not None:
            own_class_nodes.update(id(n) for n in ast.walk(cls) if n is not cls)
    for node in ast.walk(an.tree):
        if isinstance(node, ast.Name) and node.id in an.reference_names \
                and isinstance(node.ctx, ast.Load) and id(node) not in an.main_guard_nodes \
                and id(node) not in own_class_nodes:
            an.add(R.static("reference_model_used"), node, f"the reference class `{node.id}` is "
                   "used (subclassed, instantiated or called): the solution must compute "
                   "with its own Triton kernels", f"reference_model_used:{node.id}")
