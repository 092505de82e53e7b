"""docs/ARCHITECTURE.md against the code: its Layout names every library module and nothing that
does not exist; the top of the library is folders and the command line; imports run down the flow
the map draws and form no loop; an import of our own made inside a function says why it waits.

What counts as a library module: every .py file under tritonrl_lib/ except the built-in suite's
task files (tasks/builtin/: KernelBench modules loaded as text, never imported) and a package's
__init__.py that only re-exports (no function or class of its own: the package's modules say
what it holds). An __init__.py that defines something is a module like any other.

Imports are read from the source (nothing is imported here). An import made when a module is
imported (module level, class bodies, `if`/`try` blocks; `if TYPE_CHECKING:` blocks never run)
may form no cycle: that is the cycle that leaves a module half-initialised. Importing
`a.b.c` also runs the packages `a` and `a.b` first, so those count as imported too (except the
importer's own packages, which are already running). Imports made inside a function run later;
they may break a cycle of import time, but a loop they close is a dependency loop all the same:
the one that exists is listed below, and a new one fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "tritonrl_lib"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

NOT_MODULES = ("tasks/builtin/", "tasks/devset/")
# modules named in the doc before they exist (none now; a branch may add one while another writes the map)
ARRIVING: set[str] = set()
# The folders of tritonrl_lib/ in the order the data flows (ARCHITECTURE.md, "The folders, and the
# direction of imports"): a package imports only from itself and the ones before it.
FLOW = ("core", "tasks", "model", "verify", "rollout", "data", "train", "eval", "run", "report", "cli")
LONGEST_MODULE = 600  # lines: a module past this is doing several jobs (ARCHITECTURE.md, Layout)


# --------------------------------------------------------------------------- modules and the doc


def _defines_something(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)


def library_modules(lib: Path = LIB) -> set[str]:
    """Paths relative to `lib` (posix) of the modules the Layout must name."""
    out = set()
    for path in lib.rglob("*.py"):
        rel = path.relative_to(lib).as_posix()
        if "__pycache__" in rel or rel.startswith(NOT_MODULES):
            continue
        if path.name == "__init__.py" and not _defines_something(path):
            continue
        out.add(rel)
    return out


def named_in_layout(doc: Path = DOC) -> set[str]:
    """Every `path.py` the Layout section names (between '## Layout' and the next '## ')."""
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, f"{doc} has no '## Layout' section followed by another '## ' section"
    return set(re.findall(r"`([\w/]+\.py)`", match.group(1)))


def test_every_library_module_is_named():
    missing = sorted(library_modules() - named_in_layout())
    assert not missing, (f"modules docs/ARCHITECTURE.md does not name: {missing}; add one line each under "
                         "'## Layout' (`path/relative/to/tritonrl_lib.py`: what it holds)")


def test_every_named_module_exists():
    named = named_in_layout()
    absent = sorted(p for p in named - ARRIVING if not (LIB / p).is_file())
    assert not absent, (f"docs/ARCHITECTURE.md names modules that do not exist: {absent}; remove or rename "
                        "their lines under '## Layout'")
    assert len(named) >= 100  # the whole library, not a stray match


# --------------------------------------------------------------------------- the import graph


def _module_name(path: Path, lib: Path) -> str:
    parts = [lib.name, *path.relative_to(lib).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_graph(lib: Path = LIB, packages: bool = True) -> dict[str, dict[str, bool]]:
    """module -> {imported module: True if only ever imported inside a function}. With `packages`,
    importing `a.b.c` also counts `a` and `a.b` (Python runs them first); without, only what the
    import names: the module, or the package whose attribute it takes."""
    files = {_module_name(p, lib): p for p in lib.rglob("*.py")
             if "__pycache__" not in p.parts and not p.relative_to(lib).as_posix().startswith(NOT_MODULES)}
    top = lib.name

    def with_packages(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & files.keys()

    def imported(name: str) -> set[str]:
        return with_packages(name) if packages else {name} & files.keys()

    graph: dict[str, dict[str, bool]] = {}
    for mod, path in files.items():
        own = with_packages(mod)  # the importer and the packages already running around it
        is_pkg = path.name == "__init__.py"
        edges: dict[str, bool] = {}

        def add(targets: set[str], deferred: bool) -> None:
            for t in targets - own:
                edges[t] = edges.get(t, True) and deferred

        def visit(node: ast.AST, deferred: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for n in child.orelse:
                        visit_stmt(n, deferred)
                    continue
                visit_stmt(child, deferred)

        def visit_stmt(node: ast.AST, deferred: bool) -> None:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == top:
                        add(imported(alias.name), deferred)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    package = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] == top:
                    for a in node.names:  # a module of the package, or a name the package defines
                        add(imported(f"{base}.{a.name}") if f"{base}.{a.name}" in files else imported(base),
                            deferred)
                    if packages:
                        add(with_packages(base), deferred)
            visit(node, deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_cycle_at_import_time():
    at_import = {m: {t for t, deferred in e.items() if not deferred} for m, e in import_graph().items()}
    assert cycles(at_import) == [], "modules that import each other (directly or round a loop) at import time"


def test_imports_inside_functions_close_no_loop():
    # the imports as written: a package's own deferred re-exports (verify/__init__.py's __getattr__)
    # are not a dependency of every module that imports one of its modules
    every = {m: set(e) for m, e in import_graph(packages=False).items()}
    assert cycles(every) == [], ("a loop of imports (some made inside functions); move what both sides need "
                                 "into a module below both")


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_top_holds_folders_and_the_command_line():
    loose = sorted(p.name for p in LIB.glob("*.py") if p.name not in ("__init__.py", "cli.py"))
    assert not loose, f"modules loose at the top of tritonrl_lib/: {loose}; each belongs in the folder of its part"
    folders = sorted(p.name for p in LIB.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert folders == sorted(set(FLOW) - {"cli"}), (f"the folders {folders} are not the flow {FLOW}; "
                                                    "add a new one to FLOW here and to ARCHITECTURE.md")


def test_imports_run_down_the_flow():
    up = sorted(f"{m} -> {t}" for m, edges in import_graph(packages=False).items() for t in edges
                if _folder(t) and _folder(m) and FLOW.index(_folder(t)) > FLOW.index(_folder(m)))
    assert not up, ("imports against the flow (core, tasks, model, verify, rollout, data, train, eval, run, "
                    f"report, cli): {up}; move what both need into the lower folder")


def test_the_ground_floor_imports_nothing_else_of_ours():
    graph = import_graph(packages=False)
    out = sorted(f"{m} -> {t}" for m, edges in graph.items() if _folder(m) == "core"
                 for t in edges if _folder(t) != "core")
    assert not out, f"core/ imports from the rest of tritonrl: {out}"


def _deferred_imports(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each import of a tritonrl module made inside a function of `path`."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, ast.ImportFrom) and (child.level or (child.module or "").startswith(
                    LIB.name)):
                found.append((child.lineno, lines[child.lineno - 1].strip()))
            elif in_function and isinstance(child, ast.Import) and any(a.name.startswith(LIB.name)
                                                                       for a in child.names):
                found.append((child.lineno, lines[child.lineno - 1].strip()))
            visit(child, inside)

    visit(ast.parse(text), False)
    return found


def test_imports_of_our_modules_inside_functions_say_why():
    silent = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).as_posix()
        if rel.startswith(NOT_MODULES):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for lineno, text in _deferred_imports(path):
            above = lines[lineno - 2].strip() if lineno > 1 else ""
            if "#" not in text and not above.startswith("#"):
                silent.append(f"{rel}:{lineno}: {text}")
    assert not silent, ("imports of tritonrl modules inside functions with no comment saying why they wait "
                        f"(move them to the top, or say why on the line or the line above): {silent}")


def test_no_module_grows_past_one_job():
    long = sorted(f"{p.relative_to(LIB)} ({n} lines)" for p in LIB.rglob("*.py")
                  if not p.relative_to(LIB).as_posix().startswith(NOT_MODULES)
                  and (n := len(p.read_text(encoding="utf-8").splitlines())) > LONGEST_MODULE)
    assert not long, f"modules over {LONGEST_MODULE} lines: {long}; split them by what they do"


def test_the_graph_reads_imports_as_python_runs_them(tmp_path):
    """On a package written here: relative and absolute imports, parent packages, deferred and
    TYPE_CHECKING imports, and a cycle of each kind."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from .b import thing\n",
        "b.py": "import toy.a\nthing = 1\n",  # a <-> b at import time
        "c.py": "def f():\n    from . import d\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\nfrom . import c\n",
        "sub/__init__.py": "from ..c import f\n",
        "sub/e.py": "from .. import c\nfrom ..sub import e\n",
        "f.py": "class K:\n    from .sub.e import f\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    g = import_graph(pkg)
    assert g["toy.a"] == {"toy.b": False} and g["toy.b"] == {"toy.a": False}
    assert g["toy.c"] == {"toy.d": True}  # inside a function
    assert g["toy.d"] == {"toy.c": False}  # the TYPE_CHECKING import never runs
    assert g["toy.sub.e"] == {"toy.c": False}  # not itself, nor its own packages (running already)
    assert g["toy.f"] == {"toy.sub": False, "toy.sub.e": False}  # a.b.c runs package a.b first
    at_import = {m: {t for t, deferred in e.items() if not deferred} for m, e in g.items()}
    assert cycles(at_import) == [["toy.a", "toy.b"]]
    assert sorted(cycles({m: set(e) for m, e in g.items()})) == [["toy.a", "toy.b"], ["toy.c", "toy.d"]]
    as_written = import_graph(pkg, packages=False)
    assert as_written["toy.f"] == {"toy.sub.e": False} and as_written["toy.sub"] == {"toy.c": False}
