"""What the names of a candidate module refer to, read from its AST: import aliases, names
re-bound to them (`_Ev = torch.cuda.Event`, `clock = time`), and `getattr(x, "name")` with a
constant name, which is `x.name` written another way.

Two views, for two jobs:
- `aliases`: a name -> the qualified chain it holds (`torch.cuda.Event`), for names bound by an
  import or by a module-level assignment (the last one wins, as it does for the functions that run
  after import). Compute judgements and the attribute-chain rules use it.
- `maybe`: a name -> every chain it may hold, from an assignment in any scope (tuple unpacking, a
  conditional, `:=`), a loop over a literal tuple of chains, or a function parameter some call
  passes a chain to; and `returns`: the chains a module function may return. Only the chain and
  patching rules use them, which must not be escaped by a detour.
"""

from __future__ import annotations

import ast
from typing import Iterator


def dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None if the chain holds anything but names and attributes
    (an assignment expression `(m := torch.cuda).x` counts as its value)."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.NamedExpr):
            node = node.value
        else:
            break
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def root_name(node: ast.AST) -> str | None:
    """The Name at the root of an attribute/subscript/call chain (`torch` in torch.x[0].y())."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.NamedExpr):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


class NodeIndex:
    """Every node of a tree, walked once, and by type: each pass over the module reads only the
    node types it judges."""

    def __init__(self, tree: ast.AST):
        self.all = list(ast.walk(tree))
        self._by_type: dict[type, list[ast.AST]] = {}
        for n in self.all:
            self._by_type.setdefault(type(n), []).append(n)

    def of(self, *types: type) -> list[ast.AST]:
        out: list[ast.AST] = []
        for t in types:
            out.extend(self._by_type.get(t, ()))
        return out


ASSIGNING = (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)


def value_branches(node: ast.AST) -> Iterator[ast.AST]:
    """The expressions a value may evaluate to: both arms of `a if c else b`, every operand of
    `a or b`, the value of `(n := v)`, the elements of `(a, b)[i]`."""
    if isinstance(node, ast.IfExp):
        yield from value_branches(node.body)
        yield from value_branches(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            yield from value_branches(v)
    elif isinstance(node, ast.NamedExpr):
        yield from value_branches(node.value)
    elif isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Tuple, ast.List)):
        for v in node.value.elts:
            yield from value_branches(v)
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
        for v in node.value.values:
            yield from value_branches(v)
    else:
        yield node


def value_positions(index: NodeIndex) -> set[int]:
    """ids of the expressions used as values that travel on: call arguments, returned or yielded
    values, container elements, lambda bodies, values stored into attributes or items (not the
    base of an attribute access, a callee, or a plain `name = value`, which `Bindings` follows)."""
    out: set[int] = set()

    def add(expr):
        if expr is not None:
            out.update(id(b) for b in value_branches(expr))

    for n in index.of(ast.Call, ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.List, ast.Tuple, ast.Set,
                      ast.Dict, ast.Lambda, ast.arguments, ast.Assign, ast.AnnAssign, ast.AugAssign):
        if isinstance(n, ast.Call):
            for a in n.args:
                add(a.value if isinstance(a, ast.Starred) else a)
            for k in n.keywords:
                add(k.value)
        elif isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)):
            add(n.value)
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(n, "ctx", ast.Load()), ast.Load):
            for e in n.elts:
                add(e.value if isinstance(e, ast.Starred) else e)
        elif isinstance(n, ast.Dict):
            for e in (*n.keys, *n.values):
                add(e)
        elif isinstance(n, ast.Lambda):
            add(n.body)
        elif isinstance(n, ast.arguments):
            for d in (*n.defaults, *n.kw_defaults):
                add(d)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                add(n.value)
    return out


class _ConstantGetattr(ast.NodeTransformer):
    """`getattr(x, "name")` -> `x.name`; `getattr(x, "name", d)` -> `x.name or d` (the default
    stays in the tree, so it is checked too)."""

    def __init__(self):
        self.rewritten: dict[int, ast.Call] = {}

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "getattr" and not node.keywords
                and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier()):
            attr = ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value,
                                                   ctx=ast.Load()), node)
            self.rewritten[id(attr)] = node
            if len(node.args) == 3:
                return ast.copy_location(ast.BoolOp(op=ast.Or(), values=[attr, node.args[2]]), node)
            return attr
        return node


def rewrite_constant_getattr(tree: ast.Module, index: NodeIndex) -> dict[int, ast.Call]:
    """Rewrites, in place, every constant-name getattr of the builtin (unless the module binds
    `getattr` itself); returns id(new Attribute) -> the original call."""
    uses = [n for n in index.of(ast.Name) if n.id == "getattr"]
    if not uses:
        return {}
    if any(not isinstance(n.ctx, ast.Load) for n in uses) or "getattr" in bound_names(index):
        return {}
    rewriter = _ConstantGetattr()
    rewriter.visit(tree)
    return rewriter.rewritten


def splice_string_annotations(index: NodeIndex) -> bool:
    """Annotations written as strings (`def f(a: "logging.sys")`) are code that `typing.get_type_hints`
    and friends evaluate: parse each and put the expression in its place, so every rule judges it.
    Returns whether anything changed."""
    changed = False

    def parsed(node):
        nonlocal changed
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return node
        try:
            expr = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return node
        for sub in ast.walk(expr):
            if "lineno" in sub._attributes:
                ast.copy_location(sub, node)
        changed = True
        return expr

    for n in index.of(ast.arg):
        n.annotation = parsed(n.annotation)
    for n in index.of(ast.FunctionDef, ast.AsyncFunctionDef):
        n.returns = parsed(n.returns)
    for n in index.of(ast.AnnAssign):
        n.annotation = parsed(n.annotation)
    return changed


def bound_names(index: NodeIndex) -> set[str]:
    """Every name the module binds anywhere (assignments, parameters, defs, imports, handlers)."""
    out: set[str] = set()
    for n in index.of(ast.Name, ast.arg, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                      ast.ImportFrom, ast.ExceptHandler, ast.Global, ast.Nonlocal):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
    return out


def _pairs(target: ast.AST, value: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(name, value expression) for each name an assignment binds, through tuple unpacking."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from _pairs(t, v)


def assignments(nodes: Iterator[ast.AST]) -> Iterator[tuple[str, ast.AST]]:
    for node in nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                yield from _pairs(t, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield from _pairs(node.target, node.value)
        elif isinstance(node, ast.NamedExpr):
            yield from _pairs(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
            for v in node.iter.elts:
                yield node.target.id, v


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in order, through `if` / `with` blocks (not function bodies)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.For, ast.While)):
            yield from _module_level(stmt.body)
            yield from _module_level(getattr(stmt, "orelse", []) or [])


def module_assignments(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(name, value) for each module-level assignment, in order."""
    return assignments(_module_level(tree.body))


class Bindings:
    def __init__(self, tree: ast.Module, index: NodeIndex, import_aliases: dict[str, str],
                 functions: dict[str, ast.AST]):
        self.aliases = dict(import_aliases)
        # module-level re-binding, in order: `s = logging.sys`, `a = torch; c = a.cuda`
        for name, value in assignments(_module_level(tree.body)):
            q = self.qualify(value)
            if q is not None and name not in import_aliases:
                self.aliases[name] = q
        self.maybe: dict[str, set[str]] = {}
        self.returns: dict[str, set[str]] = {}  # function -> chains it may return (`return torch.cuda`)
        binds = list(assignments(index.of(*ASSIGNING)))
        calls = [n for n in index.of(ast.Call) if isinstance(n.func, ast.Name) and n.func.id in functions]
        returns = [(name, r.value) for name, fn in functions.items() for r in ast.walk(fn)
                   if isinstance(r, ast.Return) and r.value is not None]
        for _ in range(2):  # twice, so `a = torch.cuda; b = a` in one function resolves too
            for name, value in binds:
                for branch in value_branches(value):
                    q = self.qualify_any(branch)
                    if q:
                        self.maybe.setdefault(name, set()).update(q)
            self._parameters(calls, functions)
            for name, value in returns:
                for branch in value_branches(value):
                    q = self.qualify_any(branch)
                    if q:
                        self.returns.setdefault(name, set()).update(q)

    def _parameters(self, calls: list[ast.Call], functions: dict[str, ast.AST]) -> None:
        """`patch(torch.cuda.Event)` binds the parameter of `def patch(cls)` to the chain."""
        for call in calls:
            fn = functions[call.func.id]
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            passed = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
            for name, value in passed:
                for branch in value_branches(value):
                    q = self.qualify_any(branch)
                    if q:
                        self.maybe.setdefault(name, set()).update(q)

    def qualify(self, node: ast.AST, local: dict[str, str] | None = None) -> str | None:
        """Qualified name of a Name/Attribute chain rooted at an alias, else None."""
        parts = dotted(node)
        if not parts:
            return None
        head = (local or {}).get(parts[0]) or self.aliases.get(parts[0])
        return ".".join([head, *parts[1:]]) if head else None

    def qualify_any(self, node: ast.AST, depth: int = 0) -> list[str]:
        """Every chain the expression may name, through `aliases` and `maybe`, and through
        the arms of conditionals and literal containers (`[logging][0].sys`)."""
        if isinstance(node, ast.Name):
            heads = set(self.maybe.get(node.id, ()))
            if node.id in self.aliases:
                heads.add(self.aliases[node.id])
            return sorted(heads)
        if isinstance(node, ast.Attribute) and depth < 32:
            return sorted({f"{q}.{node.attr}" for b in value_branches(node.value)
                           for q in self.qualify_any(b, depth + 1)})
        if isinstance(node, ast.NamedExpr):
            return self.qualify_any(node.value, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.returns:
            return sorted(self.returns[node.func.id])  # get_event_class().elapsed_time = ...
        return []

    def local_aliases(self, fn_nodes: list[ast.AST]) -> dict[str, str]:
        """Names a function binds to a chain in its own body (`f = torch.relu`), in order;
        `fn_nodes`: the function's nodes."""
        out: dict[str, str] = {}
        for name, value in assignments(fn_nodes):
            q = self.qualify(value, out)
            if q is not None:
                out[name] = q
        return out
