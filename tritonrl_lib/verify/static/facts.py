"""What a candidate module defines, read from its AST: imports and aliases (names.py),
functions, classes, Triton kernels, the reference classes it must not use, and what ModelNew's
attributes hold.

`ModuleFacts` is built once per check and collects the findings (`add`) that the security checks
(security.py, patching.py) and the reachability pass (reach.py) make; `Finding` is one of them.
Constant-name `getattr(x, "a")` calls are rewritten to `x.a` first (names.py), so every rule
judges them like the attribute they read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from .host import is_literal
from .names import (Bindings, NodeIndex, bound_names, dotted, module_assignments, rewrite_constant_getattr,
                    root_name, splice_string_annotations, value_positions)
from .resolve import MISSING, Resolver, is_class, is_module
from .rules import KERNEL_MARKERS, NUMPY_SCALAR_OK

__all__ = ["Finding", "ModuleFacts", "AttrKind", "dotted", "root_name", "is_main_guard", "walk_skip",
           "class_fingerprint"]


@dataclass
class Finding:
    reason: str  # "static:<what>" (reasons.py)
    line: int
    message: str  # for people, names the construct and the fix
    flag: str | None = None  # cheat flag; None for a plain failure


def is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    names = [t.left, *t.comparators]
    has_name = any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)
    has_main = any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names)
    return has_name and has_main


def walk_skip(node: ast.AST, skip: set[int]) -> Iterator[ast.AST]:
    """ast.walk that does not descend into nodes whose id is in `skip`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in skip:
            continue
        yield n
        stack.extend(reversed(list(ast.iter_child_nodes(n))))


@dataclass
class AttrKind:
    kind: str  # "nn" | "local" | "kernel" | "torch" (an aliased torch callable) | "func"
    names: list[str]  # nn classes (for "nn": the module and any members), local class, kernel, qualified name
    node: ast.AST | None = None  # for "func": the lambda or function to follow


class ModuleFacts:
    def __init__(self, tree: ast.Module, policy: str, reference_names: set[str],
                 reference_classes: dict[str, str], extra_heavy_ops: frozenset[str]):
        self.tree = tree
        self.policy = policy
        self.extra = extra_heavy_ops
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, str]] = set()
        self.resolver = Resolver()
        self.index = NodeIndex(tree)  # every node once, by type: the module-wide passes read this
        if splice_string_annotations(self.index):
            self.index = NodeIndex(tree)
        self.constant_getattrs = rewrite_constant_getattr(tree, self.index)  # id(Attribute) -> original call
        if self.constant_getattrs:
            self.index = NodeIndex(tree)
        self.bound = bound_names(self.index)
        self.call_funcs = {id(n.func) for n in self.index.of(ast.Call)}
        self.value_positions = value_positions(self.index)

        self.main_guard_nodes: set[int] = set()
        for stmt in tree.body:
            if is_main_guard(stmt):
                self.main_guard_nodes.update(id(n) for n in ast.walk(stmt))

        self.aliases: dict[str, str] = {}
        self.star_imports: list[str] = []
        self._collect_imports()

        self.module_funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self._collect_defs(tree.body)
        self.star_names: dict[str, str] = {}  # name -> the module a `from m import *` took it from
        for module in self.star_imports:
            for name in self.resolver.star_exports(module):
                self.star_names.setdefault(name, module)
        self.bindings = Bindings(tree, self.index, self.aliases, self.module_funcs)
        self.aliases = self.bindings.aliases  # imports and the module-level names re-bound to them
        self.defined_names = {n.name for n in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)}
        self.method_nodes = {id(f) for c in self.index.of(ast.ClassDef)
                             for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

        self.kernels: dict[str, ast.AST] = {}  # name -> def (or the assignment making it)
        self.kernel_nodes: set[int] = set()
        self._collect_kernels()

        # Reference classes: "Model" always; the reference source's classes too. A same-named
        # class the candidate defines itself counts only if it is the reference copied verbatim.
        self.reference_names = set()
        for name in reference_names:
            own = self.classes.get(name)
            if own is None or name == "Model" or (
                    name in reference_classes and reference_classes[name] == class_fingerprint(own)):
                self.reference_names.add(name)

        # Module-level names bound to torch callables, nn modules or helpers (`act = F.gelu`,
        # `_relu = nn.ReLU()`): a call through the name is judged like a call of what it holds.
        self.global_holders: dict[str, AttrKind] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                k = self._value_kind(stmt.value)
                if k is not None and k.kind in ("nn", "torch", "func"):
                    self.global_holders[stmt.targets[0].id] = k

        # Module-level names whose value holds numpy compute (`row_max = partial(numpy.max, axis=1)`,
        # `OPS = {"exp": numpy.exp}`): forward reaching the name is host compute.
        self.numpy_holders: dict[str, str] = {}
        for name, value in module_assignments(tree):
            for sub in ast.walk(value):
                q = self.numpy_compute(sub) if isinstance(sub, (ast.Name, ast.Attribute)) else None
                if q:
                    self.numpy_holders.setdefault(name, q)

        self.module_constants = {name for name, value in module_assignments(tree) if is_literal(value, set())}
        # Module-level names whose value holds code (`OPS = {"relu": lambda t: ..., "gelu": gelu_host}`):
        # forward reaching the name reaches that code. (A function called there ran at import;
        # the name holds its result.)
        self.global_code: dict[str, list[ast.AST]] = {}
        for name, value in module_assignments(tree):
            code = [n for n in ast.walk(value) if isinstance(n, ast.Lambda)] + \
                   [self.module_funcs[n.id] for n in ast.walk(value)
                    if isinstance(n, ast.Name) and n.id in self.module_funcs and id(n) not in self.call_funcs]
            if code:
                self.global_code.setdefault(name, []).extend(code)

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
        for node in self.index.of(ast.Import, ast.ImportFrom):
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

    def qualify(self, node: ast.AST, local: dict[str, str] | None = None) -> str | None:
        """Qualified name of a Name/Attribute chain rooted at an alias (an import, or a name
        re-bound to one; `local`: a function's own), else None."""
        return self.bindings.qualify(node, local)

    def canonical(self, node: ast.AST, local: dict[str, str] | None = None) -> str | None:
        """`qualify`, with the module prefix written by the module's real name."""
        q = self.bindings.qualify(node, local)
        return self.resolver.canonical(q) if q else None

    def numpy_compute(self, node: ast.AST, local: dict[str, str] | None = None) -> str | None:
        """The numpy chain when `node` names a numpy function or ufunc that computes (not a
        module, a dtype or class, nor a scalar helper such as numpy.prod), else None."""
        q = self.canonical(node, local)
        if not q or q.split(".")[0] != "numpy" or q.rsplit(".", 1)[-1] in NUMPY_SCALAR_OK:
            return None
        obj = self.resolver.obj(q)
        if obj is not MISSING and (is_module(obj) or not callable(obj) or is_class(obj) and _numpy_value_type(obj)):
            return None
        return q

    def _decorator_names(self, fn: ast.AST) -> list[str]:
        out = []
        for d in getattr(fn, "decorator_list", []):
            target = d.func if isinstance(d, ast.Call) else d
            q = self.qualify(target)
            if q:
                out.append(q)
        return out

    def _collect_kernels(self) -> None:
        for node in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(q in KERNEL_MARKERS for q in self._decorator_names(node)):
                    self.kernels.setdefault(node.name, node)
                    self.kernel_nodes.add(id(node))
        # kernel = triton.jit(fn)  /  kernel = triton.autotune(...)(triton.jit(fn))
        for node in self.index.of(ast.Assign):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
                if any(self.qualify(c.func) in KERNEL_MARKERS for c in calls):
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

    def attr_kinds(self, cls: ast.ClassDef) -> dict[str, AttrKind]:
        """`self.attr = ...` in any method, or `attr = ...` in the class body -> what the attribute
        holds, when it can be told."""
        kinds: dict[str, AttrKind] = {}
        for c in self.class_chain(cls):
            for stmt in c.body:
                if isinstance(stmt, ast.Assign):
                    k = self._value_kind(stmt.value)
                    for t in stmt.targets:
                        if k and isinstance(t, ast.Name) and t.id not in kinds:
                            kinds[t.id] = k
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

    def _returned_kernel(self, fn: ast.AST) -> str | None:
        """The kernel a factory function returns (`def make(): @triton.jit def k(...) ...; return k`)."""
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in self.kernels:
                return node.value.id
        return None

    def _value_kind(self, value: ast.AST) -> AttrKind | None:
        if isinstance(value, ast.Name) and value.id in self.kernels:
            return AttrKind("kernel", [value.id])
        if isinstance(value, ast.Call) and value.args and self.canonical(value.func) == "functools.partial":
            return self._value_kind(value.args[0])  # partial(F.gelu, approximate="tanh") holds F.gelu
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in self.module_funcs:
            factory = self.module_funcs[value.func.id]
            made = self._returned_kernel(factory)
            # a factory's result is a kernel, or (when called) code the factory defines
            return AttrKind("kernel", [made]) if made else AttrKind("func", [value.func.id], factory)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args \
                and value.func.id in ("staticmethod", "classmethod") and value.func.id not in self.bound:
            return self._value_kind(value.args[0])
        if isinstance(value, ast.Lambda):
            return AttrKind("func", ["lambda"], value)
        if isinstance(value, ast.Name) and value.id in self.module_funcs:
            return AttrKind("func", [value.id], self.module_funcs[value.id])
        if isinstance(value, (ast.Name, ast.Attribute)):
            q = self.qualify(value)
            return AttrKind("torch", [q]) if q else None
        if not isinstance(value, ast.Call):
            return None
        if isinstance(value.func, ast.Name) and value.func.id in self.classes:
            return AttrKind("local", [value.func.id])
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
            kind = AttrKind("nn", names)
            kind.names += [f"local:{n}" for n in locals_]
            return kind
        return None


def _numpy_value_type(cls: type) -> bool:
    """numpy's scalar types and dtype questions (np.float32, np.dtype, np.finfo): not compute,
    unlike its other classes (np.vectorize, np.ndarray, np.poly1d)."""
    import numpy  # only reached for a chain that resolved into numpy

    return issubclass(cls, numpy.generic) or cls in (numpy.dtype, numpy.finfo, numpy.iinfo)


def class_fingerprint(cls: ast.ClassDef) -> str:
    return ast.dump(ast.Module(body=cls.body, type_ignores=[]), include_attributes=False)
