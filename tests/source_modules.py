"""Tests' helpers over Python source: a source imported as a module from a file of its own (@triton.jit
reads a kernel's source from the file its function was defined in, so `exec` of a string will not do), and
a class's method read as its statements."""

from __future__ import annotations

import ast
import importlib.util
import types
from pathlib import Path


def import_source(src: str, path: Path) -> types.ModuleType:
    """Write `src` to `path` and import it as the module `path.stem`."""
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def method_statements(source: str, cls: str, method: str) -> list[str]:
    """The statements of `cls.method` in `source` (its docstring left out), one unparsed string each."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == method)
    return [ast.unparse(s) for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
