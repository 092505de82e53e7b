"""The reference phase's plan: the models both sides are built with and the input sets they run.

A `Plan` holds one `ModelSpec` per model configuration ("base"; "tiny" where shrinking changed the
constructor's sizes; "base@float16" ... for the dtype input set) and the `InputSet`s in the order they
run: tiny first, then the original inputs and their variations (variations.py).

An input set is a recipe, not a copy: `draw()` makes its inputs afresh, on the device, each time they
are needed (the task's `get_inputs()` under the set's seed, inside `torch.device(device)` so a
KernelBench task's `torch.rand(...)` draws straight on the GPU, then the set's transform). No process
holds every set's inputs at once: a task whose inputs are 16 GB holds 16 GB, not five times that, and
none of it on the host. A plan can also come from the worker's cache of a task's reference phase
(reference_cache.py, small tasks only): then a set's inputs are mapped read-only from the sealed files
the worker kept (`mapped_input`), and the models must match the cached ones bit for bit
(`model_digests`).
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import random
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy
import torch

from ..sandbox.spares import inherited_fd
from .encoding import dtype_name, raw_bytes
from .runtime_checks import same_bits
from .variations import map_tensors, to_device


@dataclass
class ModelSpec:
    """One model configuration both sides are built with."""

    init_inputs: list[Any]
    state: dict[str, torch.Tensor]  # the reference's initial weights (CPU copies)
    ref: torch.nn.Module | None  # None where it never runs (a cached half-precision set), or once dropped
    dtype: torch.dtype | None = None  # cast after building (the dtype variation)


@dataclass
class InputSet:
    name: str  # tiny | original | range | seed | larger | resized | dtype:float16 | offset | timed:<k>
    stage: str  # tiny | full | timed (a timed call's checked inputs: drawn from a seed of their own)
    model_key: str
    make: Callable[[], list[Any]] | None  # draws the inputs (fresh tensors, on the device), or
    inputs: list[Any] | None  # ... the inputs themselves (mapped from the worker's cache, read-only)
    out_specs: list[tuple[tuple[int, ...], torch.dtype]]
    heavy_ops: dict[str, int | None] | None = None  # the reference's GEMM / convolution calls on this set (heavy_ops.py)
    heavy_dtypes: dict[str, list[str]] | None = None  # their operand dtypes per family (heavy_ops.operand_dtypes)

    def draw(self, device: str) -> list[Any]:
        """Fresh inputs on `device`, every call the same values."""
        if self.inputs is not None:
            return to_device(self.inputs, device)
        return on_device(self.make(), device)

    def keep(self, values: list[Any]) -> None:
        """Hold these inputs from now on instead of drawing them again (a task whose get_inputs does not
        draw the same values twice: the reference's inputs must be the candidate's)."""
        self.inputs = map_tensors(values, lambda t: t.detach().clone())


@dataclass
class Plan:
    models: dict[str, ModelSpec] = field(default_factory=dict)
    sets: list[InputSet] = field(default_factory=list)
    eval_mode: bool = False  # the reference is random in training mode: both models run in eval mode
    # the task's inputs drawn afresh from a seed (the timing's unseen values: timed_inputs.py); None: unknown
    fresh: Callable[[int], list[Any]] | None = None


def on_device(values: list[Any], device: str) -> list[Any]:
    """Tensors moved to `device` where they are not there already (no copy of those that are)."""
    return map_tensors(values, lambda t: t if t.device.type == torch.device(device).type else t.to(device))


@functools.cache
def _no_accelerator() -> bool:
    """No device type but the CPU exists in this process (none can appear later in its life)."""
    return not (torch.cuda.is_available() or torch.xpu.is_available() or torch.mtia.is_available()
                or torch.backends.mps.is_available())


def seed_torch(seed: int) -> None:
    """`torch.manual_seed(seed)`. In a process without an accelerator, the CPU generator alone, which is
    all that call seeds there: it would also queue a lazy seed for each absent device type, each with
    the formatted Python stack (a tenth of a CPU candidate's time, every source line read under the
    guard's audit hook)."""
    if _no_accelerator():
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


def drawer(get_inputs: Callable[[], Any], seed: int, device: str,
           transform: Callable[[list[Any]], list[Any]] | None = None) -> Callable[[], list[Any]]:
    """A set's recipe: `get_inputs()` under `seed`, drawn on `device`, then `transform`."""

    def make() -> list[Any]:
        seed_torch(seed)
        random.seed(seed)  # tasks that draw with Python's or numpy's global generators draw the same too
        numpy.random.seed(seed % (1 << 32))
        if device == "cpu":
            values = list(get_inputs())
        else:
            with torch.device(device):
                values = list(get_inputs())
        values = on_device(values, device)
        return transform(values) if transform is not None else values

    return make


def model_digests(models: dict[str, ModelSpec]) -> dict[str, str]:
    """Identity of each built reference model: its init inputs, weights (names, dtypes, shapes,
    bytes) and the dtype it is cast to. Models that share their weights (the dtype variation's and
    the base) hash them once."""
    state_hashes: dict[int, bytes] = {}
    out = {}
    for key, spec in models.items():
        if id(spec.state) not in state_hashes:
            h = hashlib.sha256()
            for k, v in spec.state.items():
                h.update(f"{k}:{dtype_name(v.dtype)}:{list(v.shape)}".encode())
                h.update(raw_bytes(v.detach().contiguous()))
            state_hashes[id(spec.state)] = h.digest()
        h = hashlib.sha256(repr((dtype_name(spec.dtype) if spec.dtype else None,
                                 [x if not isinstance(x, torch.Tensor) else None for x in spec.init_inputs])).encode())
        for x in spec.init_inputs:
            if isinstance(x, torch.Tensor):
                h.update(raw_bytes(x.detach().to("cpu").contiguous()))
        h.update(state_hashes[id(spec.state)])
        out[key] = h.hexdigest()
    return out


def mapped_input(desc: dict[str, Any]) -> Any:
    """One input of a cached set: a read-only tensor over the worker's sealed file, or a value."""
    if desc["kind"] == "value":
        return desc["value"]
    dtype = getattr(torch, desc["dtype"])
    shape = tuple(desc["shape"])
    if desc.get("fd") is None:
        return torch.empty(shape, dtype=dtype)  # no elements
    # mapped with its pages at once: faulting 4 KiB at a time costs ~10 ms per 32 MB on first use
    mm = mmap.mmap(inherited_fd(desc["fd"]), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                   prot=mmap.PROT_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "buffer is not writable": nothing writes it, copies are made
        return torch.frombuffer(mm, dtype=dtype).reshape(shape)


def same_values(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and same_bits(x, y)):
                return False
        elif x != y:
            return False
    return True
