"""Input variations of a KernelBench task: tiny sizes, other sizes, other value ranges, seeds, dtypes.

Sizes come from the task's module-level constants in every form KernelBench writes them
(`batch_size = 16`, `height = width = 256`, `N = 2048 * 2`, the numbers of `input_shape = (32768,)`:
tasks/kb_format.py). No resize goes below what a kernel for the published task may require: nothing
shrinks below 16 (tl.dot's smallest dimension), and every size keeps its divisibility by the powers of
two up to 16 (`shrunk`, `resized`); a size of 9 to 16 that cannot shrink is doubled in the tiny set. A constant can be resized if `get_inputs()` or `get_init_inputs()` reads it,
directly or through other module-level names (`dim = base * 3` makes `base` a size), and the
reference `Model` itself does not (a reference that reads a constant in `forward` would change
behaviour behind the candidate's back). The larger-shape variation touches only constants that
`get_init_inputs()` does not read, so the models (and their weights) stay the same; tiny sizes may
also shrink constructor sizes, and then both models are rebuilt.

Value variations exercise the operation's accepted input range, not only the range the task happens
to draw (`torch.rand` gives [0, 1)): `range` multiplies every float input by a random sign and a random
power of two in [2^-3, 2^3] per element, `offset` shifts every float input by +2 (all values of a [0, 1)
input above 1). An input set on which the reference gives non-finite outputs where it gave finite ones
is skipped (the operation does not accept those values), with a note.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from ...tasks.kb_format import module_constants, parse_kb_source, rewrite_constants

_BATCH = re.compile(r"^(b|bs|batch|batch_?size|n_?batch(es)?|num_?batch(es)?|batches)$", re.I)
# No resize takes a size below what a kernel for the published task may require: a dimension never shrinks
# below TINY_MIN_SIZE (tl.dot's smallest operand dimension: a flash-attention kernel whose head dimension
# is a block shape fails to compile at 8), and a size keeps its divisibility by every power of two up to
# POW2_KEPT (a kernel without a mask for a dimension the task publishes as a multiple of 16 stays right).
# Constants at or below TINY_KEEP (kernel sizes, strides, reduction axes) stay as they are; a size the
# tiny set cannot shrink (above TINY_KEEP, at most TINY_MIN_SIZE: `height = width = 16`) is doubled there
# instead, so no published size goes unvaried (a kernel hard-coding a width of 16 is still caught)
TINY_MIN_SIZE = 16
TINY_KEEP = 8
TINY_DIVISOR = 8  # other sizes shrink 8 times; batch-like ones as far as the rules let them (to 16)
POW2_KEPT = 16
LARGER_FACTOR = 2
VARIATION_ORDER = ("original", "range", "seed", "larger", "dtype", "offset")
RANGE_LOG2 = 3.0  # the range set's magnitudes: 2**u for u uniform in [-RANGE_LOG2, RANGE_LOG2]
# tried first: every input 2**6 times larger, signs drawn at random (an exp without the max subtracted,
# a naive softplus or tanh overflow there), kept only where the reference stays finite. One power of
# two for all elements scales exactly, so a kernel's rounding (TF32 matmuls included) is the same as on
# the drawn values: a per-element spread that wide failed honest TF32 matmuls on cancellation.
WIDE_SCALE_LOG2 = 6.0
RANGE_CHUNK = 1 << 26  # elements the range set transforms at a time
OFFSET = 2.0
STRUCTURE_MAX_ELEMENTS = 1 << 27  # inputs keep_structure looks at (a mask of 128 Mi elements: 128 MiB)
ROW_LOG2 = (-4, 2)  # the seed set's rows: each times +-2**k, k in this range (row_scaled)


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
    values = module_constants(source, elements=True)
    read_by_model = _names_read_by_classes(source)
    deps = _module_dependencies(source)
    used = _closure(info.input_names | info.init_input_names, deps)
    init_used = _closure(info.init_input_names, deps)

    def base(name: str) -> str:
        return name.split("[", 1)[0]

    resizable = {n: v for n, v in values.items()
                 if type(v) is int and v > 0 and base(n) in used and base(n) not in read_by_model}
    return SizeConstants(resizable, frozenset(n for n in resizable if base(n) in init_used))


def _module_dependencies(source: str) -> dict[str, set[str]]:
    """For every module-level name bound by an assignment, the names its value reads (`dim = base * 3`)."""
    out: dict[str, set[str]] = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            reads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.setdefault(n.id, set()).update(reads)
    return out


def _closure(names: set[str] | frozenset[str], deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(deps.get(n, ()))
    return seen


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


def pow2_kept(v: int) -> int:
    """The power of two (at most POW2_KEPT) a size is divisible by, which every resize of it keeps."""
    return min(POW2_KEPT, v & -v) if v > 0 else 1


def resized(v: int, target: float) -> int:
    """Size `v` moved to about `target`: a multiple of pow2_kept(v), never below TINY_MIN_SIZE where `v` is
    at least that (nor below its own power of two)."""
    p = pow2_kept(v)
    new = max(p, int(round(target / p)) * p)
    if v >= TINY_MIN_SIZE:
        new = max(new, TINY_MIN_SIZE)  # TINY_MIN_SIZE is a multiple of every p: divisibility stays
    return new


def shrunk(name: str, v: int) -> int | None:
    """A size constant's tiny value (see TINY_MIN_SIZE and TINY_KEEP), None where it stays as it is."""
    if v <= TINY_KEEP:
        return None
    if v <= TINY_MIN_SIZE:
        return None if is_batch_like(name) else 2 * v  # cannot shrink: varied the other way (the batch: larger)
    p = pow2_kept(v)
    target = TINY_MIN_SIZE if is_batch_like(name) else v // TINY_DIVISOR
    new = max(TINY_MIN_SIZE, target // p * p)
    return new if new < v else None


def tiny_plans(source: str) -> list[tuple[str, dict[str, int]]]:
    """Ways to shrink the task, most aggressive first: every size constant, then batch-like ones
    only (each as `shrunk` says: a size that cannot shrink is doubled). Empty when nothing changes (the
    caller then runs the original sizes)."""
    consts = size_constants(source)
    every: dict[str, int] = {}
    batch: dict[str, int] = {}
    for name, v in consts.values.items():
        new = shrunk(name, v)
        if new is None:
            continue
        every[name] = new
        if is_batch_like(name):
            batch[name] = new
    plans = []
    if every:
        plans.append(("shrunk " + ", ".join(f"{k}={v}" for k, v in every.items()), every))
    if batch and batch != every:
        plans.append(("shrunk " + ", ".join(f"{k}={v}" for k, v in batch.items()), batch))
    return plans


def larger_plan(source: str, factor: float = LARGER_FACTOR) -> tuple[str, int] | None:
    """(constant, new value) for the other-size variation, or None when no constant allows it: the
    first input-only size constant (batch-like first) times `factor` (2: the larger set; below 1 for a
    task too big to double, a smaller size, never the original's nor the tiny set's batch)."""
    consts = size_constants(source)
    names = consts.input_only
    if not names:
        return None
    name = names[0]
    old = consts.values[name]
    new = resized(old, old * factor)
    return name, new if new != old else old + pow2_kept(old)


def load_task_module(source: str, workdir: str, name: str, overrides: dict[str, int] | None = None) -> ModuleType:
    """Execute a (possibly resized) task source as a real module file, so tracebacks show its lines;
    the file is gone again once loaded (nothing of the reference stays on disk for a candidate to read)."""
    if overrides:
        source = rewrite_constants(source, overrides)
    path = os.path.join(workdir, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    try:
        return load_module_file(path, name)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


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


def ranged(values: list[Any], seed: int, signs: bool = True, log2: float = RANGE_LOG2,
           scale_log2: float = 0.0) -> list[Any]:
    """Every float input times a random power of two in [2**-log2, 2**log2] per element (and a
    random sign, with `signs`), drawn on the input's own device from `seed`, times 2**scale_log2."""
    import torch

    gen_cpu = torch.Generator().manual_seed(seed)

    def one(t: Any) -> Any:
        if not t.is_floating_point() or t.numel() == 0:
            return t.clone()
        gen = gen_cpu if t.device.type == "cpu" else torch.Generator(device=t.device).manual_seed(seed)
        out = torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t)
        # in chunks: the factors of an 8 GiB input would need several 8 GiB temporaries at once
        for part in out.view(-1).split(RANGE_CHUNK):
            if log2:
                u = torch.rand(part.shape, generator=gen, device=t.device, dtype=torch.float32)
                factor = u.mul_(2.0).sub_(1.0).mul_(log2).add_(scale_log2).exp2_()
            else:  # one power of two for every element: nothing to draw
                factor = torch.full(part.shape, 2.0 ** scale_log2, device=t.device, dtype=torch.float32)
            if signs:
                flip = torch.rand(part.shape, generator=gen, device=t.device, dtype=torch.float32) < 0.5
                factor[flip] *= -1.0
                del flip
            part.copy_(part.float().mul_(factor))
            del factor
        return out

    return map_tensors(values, one)


def row_scaled(values: list[Any], seed: int, negate: bool = True, low: int = ROW_LOG2[0],
               high: int = ROW_LOG2[1], rows: bool = True) -> list[Any]:
    """Every float input's slices along its first dimension ("rows") each times its own power of two
    2**k, k in [low, high] with both ends taken by some row (with `rows`), and with `negate` every input negated: rows of other scales within one call,
    which no set drawn alike has (a statistic taken over the whole tensor instead of per row), and inputs
    of one sign turned negative (a maximum started at zero). The sign is the whole input's, not each
    row's: a matmul's second operand has its rows along the summed dimension, where signs of their own
    would cancel and fail an honest TF32 product. Powers of two: exact in every float dtype."""
    import torch

    gen = torch.Generator().manual_seed(seed)

    def one(t: Any) -> Any:
        if not t.is_floating_point() or t.numel() == 0:
            return t.clone()
        n = t.shape[0] if t.dim() else 1
        k = torch.randint(low, high + 1, (n,), generator=gen).to(torch.float32)
        # both ends of the range in every input of two rows or more, the top one in a one-row input, at
        # rows of its own draw: with k left to chance, 3 rows all small let a logsumexp whose online
        # rescale was dropped pass 1 in 4 seeds (an error that only shows at a row's larger magnitudes)
        ends = torch.randperm(n, generator=gen)[:2]
        k[ends[0]] = high
        if n > 1:
            k[ends[1]] = low
        factor = torch.exp2(k) if rows else torch.ones(n)
        if negate:
            factor = -factor
        return t.clone().mul_(factor.view(-1, *([1] * (t.dim() - 1))).to(device=t.device, dtype=t.dtype)
                              if t.dim() else factor[0].to(device=t.device, dtype=t.dtype))

    return map_tensors(values, one)


def sorted_last_dim(values: list[Any]) -> list[Any]:
    """Every float input's values sorted ascending along its last dimension, in place (the inputs are the
    seed set's own fresh copies): the same values in another order, each row's largest last. A kernel
    that combines a row's tiles wrongly (an online softmax or logsumexp that drops the rescale, a carry
    lost between tiles) is off by little on values in random order, where the first tile's maximum is
    near the row's, and by far when every tile's is above the last. Rows of at most RANGE_CHUNK
    elements, sorted RANGE_CHUNK elements at a time (the sort's values and indices are the temporaries);
    longer rows, and inputs of fewer than two elements along it, stay as they are."""
    import torch

    def one(t: Any) -> Any:
        if not t.is_floating_point() or t.dim() == 0 or not 2 <= t.shape[-1] <= RANGE_CHUNK or not t.is_contiguous():
            return t
        rows = t.view(-1, t.shape[-1])
        step = max(1, RANGE_CHUNK // t.shape[-1])
        for start in range(0, rows.shape[0], step):
            part = rows[start:start + step]
            part.copy_(torch.sort(part, dim=-1).values)
        return t

    return map_tensors(values, one)


def keep_structure(drawn: list[Any], changed: list[Any]) -> list[Any]:
    """A value set's inputs (`changed`, made from `drawn`) with the exact structure the task's own inputs
    promise put back: where a float input is at least a quarter exact zeros (a triangular matrix, a
    mask), those entries stay zero; a square matrix (or a batch of them) that is symmetric stays
    symmetric. KernelBench's triangular and symmetric matmuls promise it, and an honest kernel may rely on
    it (skipping the zero tiles, reading B's transpose): the offset set filled the zeros, the range set's
    per-element signs broke the symmetry, and such kernels failed. Inputs over STRUCTURE_MAX_ELEMENTS are
    left as they are (the masks would cost memory a large task does not have)."""
    import torch

    out = list(changed)
    for i, (x, y) in enumerate(zip(drawn, changed)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point()
                and y.shape == x.shape and 0 < x.numel() <= STRUCTURE_MAX_ELEMENTS):
            continue
        zeros = x == 0
        if int(zeros.sum()) * 4 >= x.numel():
            y = y.masked_fill(zeros.to(y.device), 0)
        del zeros
        if x.dim() >= 2 and x.shape[-1] == x.shape[-2] > 1 and torch.equal(x, x.mT):
            y = (y + y.mT) / 2
        out[i] = y
    return out


def structured(transform: Callable[[list[Any]], list[Any]]) -> Callable[[list[Any]], list[Any]]:
    """A value set's transform that keeps the exact structure of the drawn inputs (`keep_structure`)."""
    return lambda xs: keep_structure(xs, transform(xs))


# the range set's forms, widest first: each is kept only where the reference stays finite on it
RANGES = (({"log2": 0.0, "scale_log2": WIDE_SCALE_LOG2}, f"signs, magnitudes x 2**{WIDE_SCALE_LOG2:g}"),
          ({}, f"signs and magnitudes 2**+-{RANGE_LOG2:g}"),
          ({"signs": False}, f"magnitudes 2**+-{RANGE_LOG2:g} only (the reference is not finite on negative inputs)"))
# the seed set's forms, in order: (negate, rows scaled, sorted along the last dimension, what the verdict's note
# says); None: the values as drawn. The sorted forms first; the same unsorted where the reference is not
# finite on sorted values (a cumulative product that overflows in that order)
_ROWS = f"rows times 2**k, k in [{ROW_LOG2[0]}, {ROW_LOG2[1]}]"
_SORTED = "each row sorted ascending along the last dimension"
SEED_STEPS = ((True, True, True, f"inputs negated, {_ROWS}, {_SORTED}"),
              (True, False, True, f"inputs negated, {_SORTED} (the reference is not finite on rows of other scales)"),
              (False, True, True, f"{_ROWS}, {_SORTED} (the reference is not finite on negative inputs)"),
              (True, True, False, f"inputs negated, {_ROWS} (the reference is not finite on sorted rows)"),
              (True, False, False, "inputs negated (the reference is not finite on sorted rows or rows of other "
                                   "scales)"),
              (False, True, False, f"{_ROWS} (the reference is not finite on sorted rows or negative inputs)"),
              (None, None, None, "values as drawn (the reference is not finite on negated or rescaled inputs)"))


def value_transforms(name: str, seed: int) -> list[tuple[Callable[[list[Any]], list[Any]] | None, str]]:
    """Every transform the reference phase may draw value set `name` with ("range", "seed", "offset"), in
    the order it tries them, each with what the verdict's note says of it (None: the values as drawn).
    `seed`: the set's transform seed (the range set's signs and magnitudes, the seed set's rows)."""
    if name == "range":
        return [(structured(lambda xs, kw=kw: ranged(xs, seed, **kw)), said) for kw, said in RANGES]
    if name == "seed":
        def seed_form(negate: bool, rows: bool, sort: bool) -> Callable[[list[Any]], list[Any]]:
            def transform(xs: list[Any]) -> list[Any]:
                scaled_rows = row_scaled(xs, seed, negate=negate, rows=rows)
                return sorted_last_dim(scaled_rows) if sort else scaled_rows
            return structured(transform)

        return [(None if negate is None else seed_form(negate, rows, sort), said)
                for negate, rows, sort, said in SEED_STEPS]
    if name == "offset":
        return [(structured(offset), "")]
    return [(None, "")]


def offset(values: list[Any], by: float = OFFSET) -> list[Any]:
    return map_tensors(values, lambda t: t + by if t.is_floating_point() else t.clone())


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
