"""What a candidate module defines, read from its AST: imports and aliases, functions, classes,
Triton kernels, the reference classes it must not use, and what ModelNew's attributes hold.

`ModuleFacts` is built once per check and collects the findings (`add`) that the security checks
(security.py) and the reachability pass (reach.py) make; `Finding` is one of them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from .rules import KERNEL_MARKERS


@dataclass
class Finding:
    reason: str  # "static:<what>" (reasons.py)
    line: int
    message: str  # for people, names the construct and the fix
    flag: str | None = None  # cheat flag; None for a plain failure


def dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None if the chain holds anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def root_name(node: ast.AST) -> str | None:
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
        parts = dotted(node)
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
                if any(q in KERNEL_MARKERS for q in self._decorator_names(node)):
                    self.kernels.setdefault(node.name, node)
                    self.kernel_nodes.add(id(node))
        # kernel = triton.jit(fn)  /  kernel = triton.autotune(...)(triton.jit(fn))
        for node in ast.walk(self.tree):
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
        """`self.attr = ...` in any method -> what the attribute holds, when it can be told."""
        kinds: dict[str, AttrKind] = {}
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

    def _value_kind(self, value: ast.AST) -> AttrKind | None:
        if isinstance(value, ast.Name) and value.id in self.kernels:
            return AttrKind("kernel", [value.id])
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


def class_fingerprint(cls: ast.ClassDef) -> str:
    return ast.dump(ast.Module(body=cls.body, type_ignores=[]), include_attributes=False)
