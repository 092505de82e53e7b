"""A test's Python source imported as a module from a file of its own (@triton.jit reads a kernel's
source from the file its function was defined in, so `exec` of a string will not do)."""

from __future__ import annotations

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
