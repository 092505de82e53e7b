"""Input variations of a KernelBench task: tiny sizes, larger sizes, scaled values, other seeds, dtypes.

Sizes come from the task's module-level constants (`batch_size = 16`). A constant can be resized
only if `get_inputs()` or `get_init_inputs()` reads it and the reference `Model` itself does not
(a reference that reads a constant in `forward` would change behaviour behind the candidate's back).
The larger-shape variation touches only constants that `get_init_inputs()` does not read, so the
models (and their weights) stay the same; tiny sizes may also shrink constructor sizes, and then
both models are rebuilt.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..tasks.kb_format import module_constants, parse_kb_source, rewrite_constants

_BATCH = re.compile(r"^(b|bs|batch|batch_?size|n_?batch(es)?|num_?batch(es)?|batches)$", re.I)
TINY_BATCH = 2
TINY_MIN_SIZE = 8  # constants at or below this (kernel sizes, strides, reduction axes) stay as they are
TINY_DIVISOR = 8
LARGER_FACTOR = 2
VARIATION_ORDER = ("original", "scaled", "seed", "larger", "dtype")


def is_batch_like(name: str) -> bool:
    return bool(_BATCH.match(name)) or "batch" in name.lower()


@dataclass(frozen=True)
class SizeConstants:
    """The resizable module-level int constants of a task and who reads them."""

    values: dict[str, int]  # every resizable constant (int, positive, read by get_inputs/get_init_inputs)
    init_names: frozenset[str]  # those get_init_inputs() reads (resizing them changes the model)

    @property
    def input_only(self) -> list[str]:
        """Constants that only shape the forward inputs, batch-like first."""
        names = [n for n in self.values if n not in self.init_names]
        return sorted(names, key=lambda n: (not is_batch_like(n), list(self.values).index(n)))


def size_constants(source: str) -> SizeConstants:
    info = parse_kb_source(source)
    values = module_constants(source)
    read_by_model = _names_read_by_classes(source)
    used = info.input_names | info.init_input_names
    resizable = {n: v for n, v in values.items()
                 if type(v) is int and v > 0 and n in used and n not in read_by_model}
    return SizeConstants(resizable, frozenset(info.init_input_names & set(resizable)))


def _names_read_by_classes(source: str) -> set[str]:
    """Module-level names read inside class bodies and their methods (a method's parameters and
    local variables shadow module names of the same spelling, as `in_channels` usually does)."""
    tree = ast.parse(source)
    out: set[str] = set()

    def visit(node: ast.AST, local: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = child.args
                params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
                params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
                body = child.body if isinstance(child.body, list) else [child.body]
                assigned = {n.id for b in body for n in ast.walk(b)
                            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
                for d in getattr(child, "decorator_list", []) + a.defaults + [d for d in a.kw_defaults if d]:
                    visit(d, local)
                for b in body:
                    visit(b, local | params | assigned)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                if child.id not in local:
                    out.add(child.id)
            else:
                visit(child, local)

    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            visit(stmt, set())
    return out


def tiny_plans(source: str) -> list[tuple[str, dict[str, int]]]:
    """Ways to shrink the task, most aggressive first: every size constant, then batch-like ones
    only. Empty when nothing can shrink (the caller then runs the original sizes)."""
    consts = size_constants(source)
    every: dict[str, int] = {}
    batch: dict[str, int] = {}
    for name, v in consts.values.items():
        if is_batch_like(name):
            if v > TINY_BATCH:
                every[name] = batch[name] = TINY_BATCH
        elif v > TINY_MIN_SIZE:
            every[name] = max(TINY_MIN_SIZE, v // TINY_DIVISOR)
    plans = []
    if every:
        plans.append(("shrunk " + ", ".join(f"{k}={v}" for k, v in every.items()), every))
    if batch and batch != every:
        plans.append(("shrunk " + ", ".join(f"{k}={v}" for k, v in batch.items()), batch))
    return plans


def larger_plan(source: str) -> tuple[str, int] | None:
    """(constant, new value) for the larger-shape variation, or None when no constant allows it."""
    names = size_constants(source).input_only
    if not names:
        return None
    name = names[0]
    return name, size_constants(source).values[name] * LARGER_FACTOR


def load_task_module(source: str, workdir: str, name: str, overrides: dict[str, int] | None = None) -> ModuleType:
    """Execute a (possibly resized) task source as a real module file, so tracebacks show its lines."""
    if overrides:
        source = rewrite_constants(source, overrides)
    path = os.path.join(workdir, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    return load_module_file(path, name)


def load_module_file(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# --------------------------------------------------------------------------- tensors (child side)


def map_tensors(values: list[Any], fn) -> list[Any]:
    import torch

    return [fn(v) if isinstance(v, torch.Tensor) else v for v in values]


def cpu_copies(values: list[Any]) -> list[Any]:
    return map_tensors(values, lambda t: t.detach().to("cpu", copy=True))


def to_device(values: list[Any], device: str) -> list[Any]:
    """Fresh copies on `device` (never the stored tensors themselves)."""
    return map_tensors(values, lambda t: t.detach().to(device, copy=True))


def scaled(values: list[Any], factor: float) -> list[Any]:
    return map_tensors(values, lambda t: t * factor if t.is_floating_point() else t.clone())


def cast_floats(values: list[Any], dtype) -> list[Any]:
    return map_tensors(values, lambda t: t.to(dtype) if t.is_floating_point() else t.clone())


def describe_inputs(values: list[Any]) -> str:
    import torch

    parts = []
    for v in values:
        if isinstance(v, torch.Tensor):
            parts.append(f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}")
        else:
            parts.append(repr(v)[:40])
    return ", ".join(parts)
