"""A candidate's process's tensors as the worker receives them: a description and raw bytes.

Each output becomes {kind, dtype, shape, device} and its bytes (never pickle: the worker must not
run anything the candidate's process made). Where the channel passes memfds, outputs of
shared_blobs.SHARE_MIN_BYTES and more are copied from wherever they live (the GPU) straight into a
sealed memfd, into one made ahead where there is one (`blanks_for`). The worker's side of this is
compare.decode.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from ..sandbox import shared_blobs
from ..sandbox import host_copy
from .runtime_checks import is_plain_tensor


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def encode_outputs(outs: list[Any], seal: bool = False, blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None
                   ) -> tuple[list[dict[str, Any]], list[Any]]:
    """Each output's description and raw bytes. With `seal` (a channel that passes memfds), outputs
    of SHARE_MIN_BYTES and more are copied from wherever they live (the GPU) straight into a sealed
    memfd, one copy instead of device -> host buffer -> memfd (shared_blobs.SealedBlob), into one of
    `blanks` (memfds made ahead, by size: see blanks_for) where one of the right size is left."""
    metas, blobs = [], []
    for o in outs:
        device = None
        if isinstance(o, (bool, int, float)) and not isinstance(o, torch.Tensor):
            o, device = torch.tensor(o), "any"  # a Python number lives on no device
        if not is_plain_tensor(o):
            metas.append({"kind": "other", "type": type(o).__name__})
            continue
        t = o.detach()
        metas.append({"kind": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                      "device": device or o.device.type})
        if t.is_complex():
            t = torch.view_as_real(t)
        nbytes = t.numel() * t.element_size()
        if seal and nbytes >= shared_blobs.SHARE_MIN_BYTES:
            flat = t.contiguous().reshape(-1).view(torch.uint8)

            def fill(view: memoryview, flat: torch.Tensor = flat) -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # frombuffer over a mapping: written once, here
                    host_copy.copy_to_mapping(view, flat)

            ready = (blanks or {}).get(nbytes)
            blank = ready.pop() if ready else shared_blobs.BlankBlob(nbytes, populate=not host_copy.staged(nbytes))
            blobs.append(blank.seal(fill))
            continue
        t = t.to("cpu").contiguous()
        blobs.append(raw_bytes(t))
    return metas, blobs


def spec_bytes(shape: tuple[int, ...] | list[int], dtype: torch.dtype) -> int:
    """Bytes of a tensor of this shape and dtype (an output spec, before the tensor exists)."""
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def blanks_for(specs: list[tuple[tuple[int, ...], torch.dtype]]) -> dict[int, list[shared_blobs.BlankBlob]]:
    """Memfds for the outputs these specs describe that will travel as memfds, made before the GPU
    section that fills them (release_blanks frees those not used): pages populated, except for
    outputs large enough for the staged copy (`host_copy.staged`)."""
    out: dict[int, list[shared_blobs.BlankBlob]] = {}
    for shape, dtype in specs:
        nbytes = spec_bytes(shape, dtype)
        if nbytes >= shared_blobs.SHARE_MIN_BYTES:
            try:
                blank = shared_blobs.BlankBlob(nbytes, populate=not host_copy.staged(nbytes))
            except OSError:
                break  # no memory for it now: encoding makes its own, where a failure is the candidate's
            out.setdefault(nbytes, []).append(blank)
    return out


def release_blanks(blanks: dict[int, list[shared_blobs.BlankBlob]]) -> None:
    for ready in blanks.values():
        for blank in ready:
            blank.close()
    blanks.clear()


MEAN_ABS_CHUNK = 1 << 26  # elements per step: the |x| copy of a 30 GiB output must not need 30 GiB more


def mean_abs(out: Any) -> float:
    """Mean absolute value of an output's finite entries, on its own device (the judge scales its
    absolute tolerance by how much this grows on an input set; 0 for anything else). Summed in
    chunks, so the temporary |x| stays small beside an output as large as the device allows."""
    if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()) or out.numel() == 0:
        return 0.0
    x = out.detach()
    if x.is_contiguous():
        parts = x.reshape(-1).split(MEAN_ABS_CHUNK)
    else:  # slices along the first dimension, each copied at most once
        x = x.reshape(1) if x.dim() == 0 else x
        rows = max(1, MEAN_ABS_CHUNK // max(1, x[0].numel()))
        parts = x.split(rows, dim=0)
    total, count = 0.0, 0
    for part in parts:
        mag = part.abs()
        s = float(mag.sum(dtype=torch.float64))
        n = mag.numel()
        if not math.isfinite(s):
            mag = mag[torch.isfinite(mag)]
            s, n = float(mag.sum(dtype=torch.float64)), mag.numel()
        total += s
        count += n
        del mag
    return total / count if count else 0.0


def raw_bytes(t: torch.Tensor) -> memoryview | bytes:
    """A contiguous CPU tensor's bytes, without a copy."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""
