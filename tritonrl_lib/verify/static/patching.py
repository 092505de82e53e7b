"""The static check's patching rules: writes into modules and classes, and class-based tricks.

- Stores: any assignment, augmented assignment, `del`, loop or `with` target, `setattr`/`delattr`
  with a constant name, or `__dict__` write whose object is a module or something reached from one
  (torch, torch.cuda.Event, triton.testing, time, ...), however it is named: an import alias, a
  name re-bound to one in any scope (`_Ev = torch.cuda.Event`), a loop over a tuple of them, a
  parameter some call passes one to, `type(obj)`. Timers, synchronisation and the library the
  verifier itself calls must stay what they are.
- Classes: subclassing a tensor base under any name (`_T = torch.Tensor; class X(_T)`), defining
  the dispatch hooks or other dunders that change how objects behave, or the methods that make an
  object pass for a tensor at a kernel launch (`data_ptr`, `untyped_storage`).
"""

from __future__ import annotations

import ast

from .. import reasons as R
from .facts import ModuleFacts
from .names import root_name, value_branches
from .resolve import MISSING, is_class
from .rules import DANGEROUS_DUNDER_DEFS, TENSOR_BASES, TENSOR_PROXY_METHODS

_METHODS_THE_VERIFIER_CALLS = ("forward", "__call__", "_call_impl")


def _patched_objects(an: ModuleFacts, base: ast.AST) -> list[str]:
    """What the object being written may be, when it is a module or reached from one."""
    out: list[str] = []
    for branch in value_branches(base):
        if isinstance(branch, ast.Call) and isinstance(branch.func, ast.Name) and branch.func.id == "type" \
                and "type" not in an.bound:
            out.append(f"type({ast.unparse(branch.args[0]) if branch.args else ''})")
            continue
        q = an.qualify(branch)
        out.extend([q] if q else an.bindings.qualify_any(branch))
        if not q and isinstance(branch, ast.Subscript):  # torch.cuda.__dict__["synchronize"]
            out.extend(_patched_objects(an, branch.value))
    return out


def check_store(an: ModuleFacts, node: ast.Attribute | ast.Subscript) -> None:
    """An attribute or item written (or deleted) anywhere in the module."""
    text = ast.unparse(node)
    patched = _patched_objects(an, node.value)
    if patched:
        what = f"{patched[0]}.{node.attr}" if isinstance(node, ast.Attribute) and "(" not in patched[0] else text
        an.add(R.static("monkeypatch"), node, f"assignment to `{text}` patches `{patched[0]}` (a module or "
               "something reached from one): timers, synchronisation and the libraries the verifier "
               "calls must stay as they are", f"monkeypatch:{what}")
        return
    root = root_name(node)
    if isinstance(node, ast.Attribute) and node.attr in _METHODS_THE_VERIFIER_CALLS:
        an.add(R.static("monkeypatch"), node, f"assignment to `{text}` replaces the method the "
               "verifier calls", "monkeypatch:forward_reassigned")
    elif root in an.classes and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        an.add(R.static("monkeypatch"), node, f"assignment to `{text}` patches class "
               f"`{root}` from outside its body", f"monkeypatch:{text}")


def check_setattr(an: ModuleFacts, name: str, node: ast.Call) -> None:
    """`setattr(obj, "a", v)` / `delattr(obj, "a")`: judged like `obj.a = v`; a computed name on
    anything is dynamic code."""
    if len(node.args) < 2:
        return
    target, key = node.args[0], node.args[1]
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        if _patched_objects(an, target):
            an.add(R.static("monkeypatch"), node, f"`{name}` on `{ast.unparse(target)}` (a module or "
                   "something reached from one)", f"monkeypatch:{name}")
        else:
            an.add(R.static("dynamic_code"), node, f"`{name}` with a computed attribute name "
                   "(use a plain attribute)", f"dynamic_code:{name}")
        return
    attr = key.value
    if attr.startswith("__") and attr.endswith("__"):
        an.add(R.static("introspection"), node, f"`{name}(..., {attr!r})` reaches interpreter "
               "internals", f"introspection:{attr}")
        return
    store = ast.copy_location(ast.Attribute(value=target, attr=attr, ctx=ast.Store()), node)
    check_store(an, store)


def _is_tensor_base(an: ModuleFacts, base: ast.AST) -> str | None:
    for branch in value_branches(base):
        for q in ([an.qualify(branch)] if an.qualify(branch) else an.bindings.qualify_any(branch)):
            if q in TENSOR_BASES:
                return q
            obj = an.resolver.obj(an.resolver.canonical(q))
            if obj is not MISSING and is_class(obj) and _subclasses_tensor(obj):
                return q
    return None


def _subclasses_tensor(cls: type) -> bool:
    import torch  # already imported by the policy tables

    return any(b is torch.Tensor or b is torch._C.TensorBase
               for b in type.__dict__["__mro__"].__get__(cls))


def check_class(an: ModuleFacts, node: ast.ClassDef) -> None:
    for b in node.bases:
        q = _is_tensor_base(an, b)
        if q:
            an.add(R.static("monkeypatch"), node, f"class `{node.name}` subclasses `{q}`: tensor "
                   "subclasses and dispatch modes can change what ops and comparisons do",
                   "monkeypatch:tensor_subclass")
    for stmt in node.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if node.name == "ModelNew" and names & {"forward", "__call__"}:
                an.add(R.static("monkeypatch"), stmt, "`forward` bound by assignment in "
                       "ModelNew: define it with `def forward(self, ...)`",
                       "monkeypatch:forward_reassigned")
            for hook in sorted(names & DANGEROUS_DUNDER_DEFS):
                an.add(R.static("monkeypatch"), stmt, f"binds `{hook}` in class `{node.name}`: overriding "
                       "this hook can change how the verifier calls or compares the model",
                       f"monkeypatch:def {hook}")
            for proxy in sorted(names & TENSOR_PROXY_METHODS):
                _proxy(an, stmt, node.name, proxy)


def check_def(an: ModuleFacts, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    if node.name in DANGEROUS_DUNDER_DEFS:
        an.add(R.static("monkeypatch"), node, f"defines `{node.name}`: overriding this hook can change "
               "how the verifier calls or compares the model", f"monkeypatch:def {node.name}")
    if node.name in TENSOR_PROXY_METHODS and id(node) in an.method_nodes:
        _proxy(an, node, "", node.name)


def _proxy(an: ModuleFacts, node: ast.AST, cls: str, method: str) -> None:
    owner = f" in class `{cls}`" if cls else " in a class"
    an.add(R.static("monkeypatch"), node, f"defines `{method}`{owner}: an object that passes for a "
           "tensor at a kernel launch runs its own code where the verifier does not look; launch "
           "kernels on real tensors", "monkeypatch:tensor_proxy")
