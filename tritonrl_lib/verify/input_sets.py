"""The reference phase's plan: the models both sides are built with and the input sets they run.

A `Plan` holds one `ModelSpec` per model configuration ("base"; "tiny" where shrinking changed the
constructor's sizes; "base@float16" ... for the dtype input set) and the `InputSet`s in the order
they run: tiny first, then the original inputs and their variations (variations.py). Input sets
hold CPU copies; every call gets fresh device copies. A plan also comes from the worker's cache of
a task's reference phase (reference_cache.py): then its inputs are mapped read-only from the sealed
files the worker kept (`mapped_input`), and the models must match the cached ones bit for bit
(`model_digests`).
"""

from __future__ import annotations

import hashlib
import mmap
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from .encoding import dtype_name, raw_bytes
from .runtime_checks import same_bits
from .spares import inherited_fd


@dataclass
class ModelSpec:
    """One model configuration both sides are built with."""

    init_inputs: list[Any]
    state: dict[str, torch.Tensor]  # the reference's initial weights (CPU copies)
    ref: torch.nn.Module | None  # None where it never runs (a cached half-precision set)
    dtype: torch.dtype | None = None  # cast after building (the dtype variation)


@dataclass
class InputSet:
    name: str  # tiny | original | scaled | seed | larger | dtype:float16 ...
    stage: str  # tiny | full
    model_key: str
    inputs: list[Any]  # CPU copies; every call gets fresh device copies
    out_specs: list[tuple[tuple[int, ...], torch.dtype]]


@dataclass
class Plan:
    models: dict[str, ModelSpec] = field(default_factory=dict)
    sets: list[InputSet] = field(default_factory=list)


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
