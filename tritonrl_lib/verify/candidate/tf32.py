"""TF32's own error on an input set, measured in the reference phase (precision.py says what it allows).

TF32 is float32 with its mantissa rounded to 10 bits, on the operands of a matrix product, accumulated in
float32: a Triton `tl.dot` on float32 operands computes that by default, as cuBLAS and cuDNN do with TF32
allowed. `Tf32Operands` runs the reference so, on every device: each heavy op's (heavy_ops.operand_key:
GEMM, convolution, attention) float32 operands rounded to TF32 (round to nearest even, as Triton's
interpreter and its TMA path round) before the op runs. `tf32_error` is how far those outputs are from
the reference's own, per output: [largest |difference|, ||difference||_2] over the finite values.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .heavy_ops import operand_key

ERROR_CHUNK = 1 << 24  # elements compared at a time (a float32 difference of 64 MiB)


def tf32_round(t: torch.Tensor) -> torch.Tensor:
    """A float32 tensor's values rounded to TF32 (10 mantissa bits, to nearest even; inf and NaN kept)."""
    bits = t.contiguous().view(torch.int32)
    special = (bits & 0x7F800000) == 0x7F800000
    rounded = (bits + (((bits >> 13) & 1) + 0x0FFF)) & -8192  # -8192: 0xFFFFE000 as int32
    return torch.where(special, bits, rounded).view(torch.float32).view(t.shape)


def _rounded(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return tf32_round(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_rounded(v) for v in x)
    return x


class Tf32Operands(TorchDispatchMode):
    """While active: every heavy op's float32 operands are rounded to TF32 before it runs."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        key = operand_key(func, args)
        if key is not None and "float32" in key.partition(":")[2].split("+"):
            args = tuple(_rounded(a) for a in args)
        return func(*args, **(kwargs or {}))


def uses_float32_heavy_ops(keys: Any) -> bool:
    """Whether an op recorder's heavy operand keys include float32 operands."""
    return any("float32" in str(k).partition(":")[2].split("+") for k in keys)


def tf32_error(outs: list[Any], tf32_outs: list[Any]) -> list[list[float] | None]:
    """Per output: [largest |difference|, ||difference||_2] between the TF32 run's output and the
    reference's, over values finite in both (None for an output that is not float32)."""
    out: list[list[float] | None] = []
    for a, b in zip(outs, tf32_outs):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == torch.float32
                and b.dtype == torch.float32 and a.shape == b.shape):
            out.append(None)
            continue
        largest, squares = 0.0, 0.0
        fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
        for start in range(0, fa.numel(), ERROR_CHUNK):
            d = fb[start:start + ERROR_CHUNK] - fa[start:start + ERROR_CHUNK]
            d = torch.where(torch.isfinite(d), d, torch.zeros((), dtype=d.dtype, device=d.device)).abs_()
            if d.numel():
                largest = max(largest, float(d.max()))
                squares += float(torch.linalg.vector_norm(d, dtype=torch.float64)) ** 2
            del d
        out.append([largest, squares ** 0.5])
    return out
