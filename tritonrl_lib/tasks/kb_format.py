"""Parse, validate and resize KernelBench-format task modules.

A KernelBench task is a plain Python module: `class Model(nn.Module)` (the reference), module-level
shape constants (`batch_size = 16`, `dim = 16384`), `get_inputs()` (the forward arguments, on CPU)
and `get_init_inputs()` (the constructor arguments). Everything here works on the source text
through `ast`, so no untrusted task code is ever executed to inspect it.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field

Number = int | float | bool

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")

_FUNCTION_FIX = {
    "get_inputs": "add `def get_inputs(): return [torch.randn(batch_size, dim)]`, returning the list of "
    "tensors `Model.forward` takes",
    "get_init_inputs": "add `def get_init_inputs(): return [...]`, returning the list of `Model.__init__` "
    "arguments (`return []` when it takes none)",
}


@dataclass(frozen=True)
class FormatProblem:
    """One thing wrong with one task file: where, what, and how to fix it."""

    path: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}. Fix: {self.fix}."


class TaskFormatError(ValueError):
    """One or more task files are not valid KernelBench-format modules.

    `problems` lists every problem found; the message names each file, what is missing and the fix.
    """

    def __init__(self, problems: list[FormatProblem]):
        self.problems = list(problems)
        files = sorted({p.path for p in self.problems})
        if len(files) == 1:
            head = f"{files[0]} is not a valid KernelBench task"
        else:
            head = f"{len(files)} task files are not valid KernelBench tasks"
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{head}:\n{body}")

    @property
    def paths(self) -> list[str]:
        return sorted({p.path for p in self.problems})


@dataclass(frozen=True)
class Constant:
    """A module-level numeric constant and where its value sits in the source.

    Every form KernelBench writes: `n = 4`, `eps: float = 1e-5`, `h, w = 32, 32`, `height = width = 256`
    (a chain: `chain` names every target), `N = 2048 * 2` (arithmetic on literals) and, with
    `module_constants(..., elements=True)`, the numbers inside a shape tuple: `input_shape = (32768,)` gives
    `input_shape[0]` (`element` is its index).
    """

    name: str
    value: Number
    lineno: int  # 1-based line of the value's first character
    col: int  # UTF-8 byte offset of the value within that line
    end_lineno: int
    end_col: int
    chain: tuple[str, ...] = ()  # every target of `a = b = <value>` (empty for one target)
    stmt: tuple[int, int, int, int] = (0, 0, 0, 0)  # the whole statement's span (for a chain's rewrite)
    element: int | None = None  # index inside a tuple value (`input_shape[0]`)

    @property
    def base(self) -> str:
        """The module-level name this constant belongs to (`input_shape` for `input_shape[0]`)."""
        return self.name.split("[", 1)[0]


@dataclass(frozen=True)
class KBModule:
    """What a valid KernelBench module declares, read from its AST."""

    path: str
    model_doc: str  # the docstring of `class Model` ("" if none)
    init_args: tuple[str, ...]  # `Model.__init__` parameters after `self`
    forward_args: tuple[str, ...]  # `Model.forward` parameters after `self`
    constants: dict[str, Constant] = field(default_factory=dict)
    init_input_names: frozenset[str] = frozenset()  # module-level names read by get_init_inputs()
    input_names: frozenset[str] = frozenset()  # module-level names read by get_inputs()

    @property
    def constant_values(self) -> dict[str, Number]:
        return {name: c.value for name, c in self.constants.items()}

    @property
    def description(self) -> str:
        """The first paragraph of Model's docstring, on one line."""
        first = self.model_doc.strip().split("\n\n")[0]
        return " ".join(first.split())


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
          ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_MAX_MAGNITUDE = 1 << 62  # an expression past this is no size (and `10 ** 10 ** 10` is not evaluated)


def _literal_number(node: ast.expr) -> Number | None:
    """The value of `12`, `-0.5`, `True`, `1e-5` or arithmetic on such literals (`2048 * 2`, `2 ** 10`);
    None for anything else (tuples, names, calls)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _literal_number(node.operand)
        if inner is None or isinstance(inner, bool):
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        left, right = _literal_number(node.left), _literal_number(node.right)
        if left is None or right is None or isinstance(left, bool) or isinstance(right, bool):
            return None
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > _MAX_MAGNITUDE):
            return None
        try:
            value = _ARITH[type(node.op)](left, right)
        except (ArithmeticError, ValueError):
            return None
        if not isinstance(value, (int, float)) or abs(value) > _MAX_MAGNITUDE:
            return None
        return value
    return None


def _module_constants(tree: ast.Module, elements: bool = False) -> dict[str, list[Constant]]:
    """Every module-level numeric constant in the forms `Constant` lists (tuple elements with `elements`)."""
    out: dict[str, list[Constant]] = {}

    def add(name: str, value: ast.expr, stmt: ast.stmt, chain: tuple[str, ...] = (),
            element: int | None = None) -> None:
        number = _literal_number(value)
        if number is not None:
            span = (stmt.lineno, stmt.col_offset, stmt.end_lineno or stmt.lineno,
                    stmt.end_col_offset or stmt.col_offset)
            out.setdefault(name, []).append(
                Constant(name, number, value.lineno, value.col_offset, value.end_lineno or value.lineno,
                         value.end_col_offset or value.col_offset, chain, span, element))

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            value = stmt.value
            if len(names) == len(stmt.targets) and names:
                chain = tuple(names) if len(names) > 1 else ()
                for name in names:
                    add(name, value, stmt, chain)
                if elements and len(names) == 1 and isinstance(value, ast.Tuple):
                    for i, v in enumerate(value.elts):
                        add(f"{names[0]}[{i}]", v, stmt, element=i)
            elif (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple)
                  and isinstance(value, ast.Tuple) and len(stmt.targets[0].elts) == len(value.elts)):
                for t, v in zip(stmt.targets[0].elts, value.elts):
                    if isinstance(t, ast.Name):
                        add(t.id, v, stmt)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            add(stmt.target.id, stmt.value, stmt)
    return out


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    """The last top-level statement binding each name (def, class, assignment or import)."""
    bound: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        bound[n.id] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                bound[(alias.asname or alias.name).split(".")[0]] = stmt
    return bound


def _names_read(tree: ast.Module, func: str) -> frozenset[str]:
    """Module-level names a top-level function reads, following calls to other top-level functions."""
    funcs = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen: set[str] = set()
    names: set[str] = set()
    todo = [func]
    while todo:
        name = todo.pop()
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        for node in ast.walk(funcs[name]):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                names.add(node.id)
                if node.id in funcs:
                    todo.append(node.id)
    return frozenset(names)


def _kind(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.ClassDef):
        return f"a class (line {stmt.lineno})"
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return f"an import (line {stmt.lineno})"
    return f"a variable assigned on line {stmt.lineno}"


def _method_args(cls: ast.ClassDef, method: str) -> tuple[str, ...] | None:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == method:
            a = stmt.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            if a.vararg:
                names.append("*" + a.vararg.arg)
            if a.kwarg:
                names.append("**" + a.kwarg.arg)
            return tuple(names[1:])
    return None


def _subclasses_module(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        text = ast.unparse(base)
        if text.split(".")[-1] == "Module":
            return True
    return False


def check_kb_source(source: str, path: str = "<source>") -> tuple[KBModule | None, list[FormatProblem]]:
    """Parse a KernelBench module; return (module info or None, every problem found)."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        return None, [FormatProblem(path, f"has a Python syntax error at {where}: {e.msg}",
                                    f"make it valid Python (check with `python -m py_compile {path}`)")]
    problems: list[FormatProblem] = []
    bound = _top_level(tree)

    model = bound.get("Model")
    init_args: tuple[str, ...] = ()
    forward_args: tuple[str, ...] = ()
    doc = ""
    if model is None:
        problems.append(FormatProblem(path, "defines no `class Model`",
                                      "define the reference as `class Model(nn.Module)` with `__init__` and "
                                      "`forward` at the top level of the module (KernelBench format)"))
    elif not isinstance(model, ast.ClassDef):
        problems.append(FormatProblem(path, f"`Model` is {_kind(model)}, not a class",
                                      "define `class Model(nn.Module)` at the top level of the module"))
    else:
        doc = ast.get_docstring(model) or ""
        if not doc:  # some files document the model in __init__ instead
            init = next((f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            doc = (ast.get_docstring(init) or "") if init else ""
        if not _subclasses_module(model):
            problems.append(FormatProblem(path, f"`class Model` (line {model.lineno}) does not subclass nn.Module",
                                          "declare it as `class Model(nn.Module)`"))
        fwd = _method_args(model, "forward")
        if fwd is None:
            problems.append(FormatProblem(path, f"`class Model` (line {model.lineno}) has no `forward` method",
                                          "add `def forward(self, x): ...` computing the reference output"))
        else:
            forward_args = fwd
        init_args = _method_args(model, "__init__") or ()

    for fname in REQUIRED_FUNCTIONS:
        stmt = bound.get(fname)
        if stmt is None:
            problems.append(FormatProblem(path, f"defines no `{fname}()`", _FUNCTION_FIX[fname]))
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            problems.append(FormatProblem(path, f"`{fname}` is {_kind(stmt)}, not a function",
                                          f"make it a function: {_FUNCTION_FIX[fname]}"))
        else:
            a = stmt.args
            required = len(a.posonlyargs + a.args) - len(a.defaults) + sum(d is None for d in a.kw_defaults)
            if required > 0:
                problems.append(FormatProblem(path, f"`{fname}()` (line {stmt.lineno}) takes required arguments",
                                              f"define it as `def {fname}():` with no parameters; read sizes from "
                                              "module-level constants instead"))

    if problems:
        return None, problems
    constants = {name: occ[-1] for name, occ in _module_constants(tree).items()}
    info = KBModule(
        path=path,
        model_doc=doc,
        init_args=init_args,
        forward_args=forward_args,
        constants=constants,
        init_input_names=_names_read(tree, "get_init_inputs"),
        input_names=_names_read(tree, "get_inputs"),
    )
    return info, []


def parse_kb_source(source: str, path: str = "<source>") -> KBModule:
    """Parse a KernelBench module or raise TaskFormatError naming every problem in it."""
    info, problems = check_kb_source(source, path)
    if problems:
        raise TaskFormatError(problems)
    assert info is not None
    return info


def module_constants(source: str, elements: bool = False) -> dict[str, Number]:
    """Module-level numeric constants in every form `Constant` lists (the last assignment wins); with
    `elements`, also the numbers inside shape tuples (`input_shape[0]`)."""
    return {name: occ[-1].value for name, occ in _module_constants(ast.parse(source), elements).items()}


def init_constant_names(source: str) -> frozenset[str]:
    """Module-level constants that `get_init_inputs()` reads: changing them changes the model itself."""
    tree = ast.parse(source)
    return frozenset(_names_read(tree, "get_init_inputs") & set(_module_constants(tree)))


def _format_number(value: Number) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"constant values must be int, float or bool, got {type(value).__name__}")


def rewrite_constants(source: str, values: dict[str, Number], path: str = "<source>") -> str:
    """Return `source` with the module-level constants in `values` set to new numbers.

    Only the value on the right of each assignment changes (`2048 * 2` becomes one number); comments,
    spacing and every other line stay byte-for-byte the same. A chain `height = width = 256` whose names
    get different values is split into `height = 32; width = 256` on the same line. Tuple elements are
    named as `module_constants(..., elements=True)` names them (`input_shape[0]`). A name that is not a
    module-level numeric constant is an error (a typo in a size preset must not pass silently).
    """
    tree = ast.parse(source, filename=path)
    found = _module_constants(tree, elements=any("[" in n for n in values))
    missing = [n for n in values if n not in found]
    if missing:
        known = ", ".join(sorted(found)) or "none"
        raise KeyError(f"{path}: no module-level numeric constant named {', '.join(map(repr, missing))} "
                       f"(constants in the file: {known}); fix the size preset or the task file")
    data = source.encode("utf-8")
    line_starts = [0]
    for line in data.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return line_starts[lineno - 1] + col

    edits: dict[int, tuple[int, bytes]] = {}  # start -> (end, new text): one edit per value or chain
    chains: dict[int, dict[str, str]] = {}  # a chain's statement start -> each of its names' new text
    for name, value in values.items():
        for c in found[name]:
            if not c.chain:
                edits[offset(c.lineno, c.col)] = (offset(c.end_lineno, c.end_col), _format_number(value).encode("utf-8"))
                continue
            start, end = offset(*c.stmt[:2]), offset(*c.stmt[2:])
            old = data[offset(c.lineno, c.col):offset(c.end_lineno, c.end_col)].decode("utf-8")
            texts = chains.setdefault(start, {n: old for n in c.chain})
            texts[name] = _format_number(value)
            if len(set(texts.values())) == 1:
                text = " = ".join([*c.chain, texts[name]])
            else:
                text = "; ".join(f"{n} = {texts[n]}" for n in c.chain)
            edits[start] = (end, text.encode("utf-8"))
    for start in sorted(edits, reverse=True):
        end, text = edits[start]
        data = data[:start] + text + data[end:]
    return data.decode("utf-8")
