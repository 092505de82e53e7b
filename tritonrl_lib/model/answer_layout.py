"""The order of an SFT answer's parts: `ModelNew` first (right after the imports), then what it calls (the
data stage writes launch helpers before kernels, so each function follows the line that calls it).

A solution module as people write it defines its kernels and launch helpers first and `ModelNew`
last, so the constructor, which must take `Model`'s parameters in `Model`'s order, is written a
thousand tokens after the reference that shows them. With `ModelNew` first the copy is made right
after the prompt, and the kernels then follow the names `forward` gave them. Measured on held-out
KernelBench with the 135M model (docs/RESULTS.md, eighth session), the order changed neither Level 1
(22 and 21 right samples on the 13 problems verified both ways) nor Level 2 (0% both ways; the
constructor was not what failed there). `model_first` is the default because the current figures
were measured with it; `as_written` keeps the data stage's order.

Moving the class up is a reordering: module-level functions are looked up when `forward` runs, not
when the class is defined. It is done only where nothing the class statement evaluates can tell the
orders apart: its body holds only method definitions (and a docstring); what runs when it is defined
(bases, class keywords, decorators, default values, annotations) calls nothing and reads only names
the imports bound or builtins; the statements it moves ahead of only define functions and assign
names, and none of them binds `ModelNew` or a name the class statement reads, or looks `ModelNew` up
(by name, by the string, or through `globals()` and the like). One assumption is left:
that a call among those statements (a decorator, an assigned value) does not rebind an attribute of
an imported module that the class statement reads. Otherwise the module is returned unchanged.
"""

from __future__ import annotations

import ast
import builtins

from .prompts import format_completion

LAYOUTS = ("model_first", "as_written")


def model_first(code: str) -> str:
    """`code` with its top-level `class ModelNew` moved to just after the leading imports, or `code`
    unchanged where that could change the program (or it is already first, or absent)."""
    try:
        return _model_first(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a module too deep for ast: left as it is
        return code


def _model_first(code: str) -> str:
    tree = ast.parse(code)
    body = tree.body
    head = _import_block_end(body)
    index = next((i for i, n in enumerate(body) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if index is None or index <= head:
        return code
    if any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in body[index + 1:]):
        return code  # redefined later: the last definition wins, so the order matters
    cls = body[index]
    reads = _class_reads(cls, _future_annotations(body))
    bound = _bindings(body[head:index])
    if reads is None or bound is None or "ModelNew" in bound or reads & bound \
            or not reads <= _bound_by_imports(body[:head]) | set(dir(builtins)):
        return code
    lines = code.splitlines()
    start = min([cls.lineno] + [d.lineno for d in cls.decorator_list]) - 1
    # comment lines directly above the class travel with it
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    block = lines[start:cls.end_lineno]
    rest = lines[:start] + lines[cls.end_lineno:]
    cut = body[head - 1].end_lineno if head else 0
    moved = _squeeze(rest[:cut]) + ["", ""] * bool(cut) + block + ["", ""] + _squeeze(rest[cut:])
    out = "\n".join(_collapse_blank_runs(moved)).strip("\n") + "\n"
    return out if _same_statements(tree, out, index, head) else code


def relaid_completion(completion: str, solution: str, layout: str) -> str:
    """An SFT completion in `layout`: the data stage's completion (the fenced `solution`, nothing
    else) rebuilt with the solution in the new order; any other completion (a lead-in line, a user's
    own records) is kept as it is."""
    if layout not in LAYOUTS:
        raise ValueError(f"answer layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    if layout == "as_written" or not solution.strip() or completion != format_completion(solution):
        return completion
    return format_completion(model_first(solution))


def laid_out(record: dict, layout: str) -> list[dict[str, str]]:
    """A data-stage record's `completion` messages with the answer in `layout` (a record without its
    `solution`, as a user may write one, keeps its completion)."""
    solution = record.get("solution") or ""
    return [dict(m, content=relaid_completion(m["content"], solution, layout)) if m.get("role") == "assistant"
            else m for m in record["completion"]]


# --------------------------------------------------------------------------- the checks


def _import_block_end(body: list[ast.stmt]) -> int:
    """How many leading statements are imports (a module docstring counts with them)."""
    i = 0
    for i, node in enumerate(body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, str)
        if not (is_doc or isinstance(node, (ast.Import, ast.ImportFrom))):
            return i
    return len(body)


def _future_annotations(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
               and any(a.name == "annotations" for a in n.names) for n in body)


def _bound_by_imports(head: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in head:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def _definition_time(fn: ast.FunctionDef | ast.AsyncFunctionDef, lazy_annotations: bool) -> list[ast.expr]:
    """What runs when `def` itself runs: decorators, default values and (unless postponed) annotations."""
    a = fn.args
    out = [*fn.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)]
    if not lazy_annotations:
        every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
        out += [x.annotation for x in every if x.annotation is not None]
        out += [fn.returns] if fn.returns is not None else []
    return out


def _class_reads(cls: ast.ClassDef, lazy_annotations: bool) -> set[str] | None:
    """The names the class statement reads while it runs, or None where it could do more than read
    names: a body statement other than a method (or docstring, `pass`), or a call, lambda,
    comprehension or assignment expression among what it evaluates."""
    evaluated: list[ast.AST] = [*cls.bases, *cls.keywords, *cls.decorator_list]
    for i, node in enumerate(cls.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            evaluated += _definition_time(node, lazy_annotations)
        elif isinstance(node, ast.Pass) or (i == 0 and isinstance(node, ast.Expr)
                                             and isinstance(node.value, ast.Constant)):
            continue
        else:
            return None
    names: set[str] = set()
    for expr in evaluated:
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Call, ast.Lambda, ast.NamedExpr, ast.comprehension, ast.Await, ast.Yield,
                                ast.YieldFrom)):
                return None
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


def _bindings(stmts: list[ast.stmt]) -> set[str] | None:
    """The names the statements the class would move ahead of bind, or None where they do more than
    define functions and assign names (a bare call, another class, an import, an attribute or item
    assignment, control flow): those could change what the class statement sees."""
    names: set[str] = set()
    executed: list[ast.AST] = []  # what runs at module level: values, decorators, defaults, annotations
    for node in stmts:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            executed += _definition_time(node, lazy_annotations=False)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            executed += [node.value] if node.value is not None else []
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                parts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                if not all(isinstance(p, ast.Name) for p in parts):
                    return None
                names.update(p.id for p in parts)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a bare string
        else:
            return None
    for expr in executed:  # nothing there may look ModelNew up, by name or through the module's namespace
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Name) and sub.id in ("ModelNew", *_NAMESPACE_READERS) \
                    or isinstance(sub, ast.Constant) and sub.value == "ModelNew":
                return None
    return names


_NAMESPACE_READERS = ("globals", "vars", "locals", "eval", "exec", "__import__", "__name__")


def _same_statements(before: ast.Module, text: str, index: int, head: int) -> bool:
    """The new text parses to the old statements, the class moved to position `head`."""
    try:
        after = ast.parse(text)
    except SyntaxError:
        return False
    old = list(before.body)
    old.insert(head, old.pop(index))
    return [ast.dump(n) for n in old] == [ast.dump(n) for n in after.body]


def _squeeze(lines: list[str]) -> list[str]:
    """Lines without blank ones at either end."""
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _collapse_blank_runs(lines: list[str]) -> list[str]:
    """At most two blank lines in a row (the gap the class left behind)."""
    out: list[str] = []
    for ln in lines:
        if not ln.strip() and len(out) >= 2 and not out[-1].strip() and not out[-2].strip():
            continue
        out.append(ln)
    return out

