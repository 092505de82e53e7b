"""libdevice under the Triton interpreter, for the CPU verifier.

`triton.language.extra.libdevice` (and the CUDA backend's `extra.cuda.libdevice`) are stubs that the
compiler links to NVIDIA's libdevice; the interpreter has no such library, so `libdevice.tanh(x)`
returns None there and an honest kernel (GELU's tanh, Mish's softplus, ...) failed on the CPU with a
TypeError deep in the interpreter, while it compiles and runs on a GPU. In a candidate's process on the
CPU (trusted setup, before its import) the floating-point math of libdevice is filled in with numpy on
the interpreter's arrays, as the interpreter does for `tl.exp` or `tl.erf`. Bit tricks and integer
conversions (`clz`, `float_as_int`, ...) are left as they are: they still fail, as an interpreter
limitation.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np


def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _fdim(x, y):
    return np.where(x > y, x - y, 0).astype(np.result_type(x, y))


_vec = np.vectorize  # scalar math from `math` where numpy has no ufunc

UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": _round_half_away, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x).astype(x.dtype),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1 / np.cbrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x),
    "erf": _vec(math.erf), "erfc": _vec(math.erfc), "lgamma": _vec(math.lgamma), "tgamma": _vec(math.gamma),
    "normcdf": lambda x: 0.5 * _vec(math.erfc)(-x / math.sqrt(2.0)), "rcp_rn": lambda x: 1 / x,
    "saturatef": lambda x: np.clip(x, 0, 1), "fast_expf": np.exp, "fast_logf": np.log, "fast_log2f": np.log2,
    "fast_log10f": np.log10, "fast_exp10f": lambda x: np.power(10.0, x).astype(x.dtype), "fast_sinf": np.sin,
    "fast_cosf": np.cos, "fast_tanf": np.tan,
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power, "fast_powf": np.power, "atan2": np.arctan2, "fmod": np.fmod, "remainder": _vec(math.remainder),
    "hypot": np.hypot, "copysign": np.copysign, "fdim": _fdim, "nextafter": np.nextafter, "div_rn": np.divide,
    "fast_dividef": np.divide, "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply, "fmax": np.fmax,
    "fmin": np.fmin,
}
TERNARY = {"fma": lambda x, y, z: x * y + z, "fma_rn": lambda x, y, z: x * y + z}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite,
              "isfinited": np.isfinite}


def _elementwise(fn: Callable[..., np.ndarray], predicate: bool = False) -> Callable[..., Any]:
    def call(*args: Any, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError("libdevice functions take Triton tensors")
        ref = max(tensors, key=lambda t: np.asarray(t.handle.data).ndim)
        dtype = np.asarray(ref.handle.data).dtype
        values = [np.asarray(a.handle.data) if isinstance(a, tl.tensor)
                  else np.asarray(getattr(a, "value", a), dtype=dtype) for a in args]
        out = np.asarray(fn(*values))
        if predicate:
            scalar = tl.int1
            out = out.astype(np.bool_)
        else:
            scalar = ref.dtype.scalar
            out = out.astype(dtype)
        shape = list(out.shape)
        ty = tl.block_type(scalar, shape) if shape else scalar
        return tl.tensor(TensorHandle(out, scalar), ty)

    return call


_INSTALLED: list[bool] = [False]


def install() -> None:
    """Fill in libdevice's floating-point math in this process (a CPU worker, inherited by its children)."""
    import importlib

    if _INSTALLED[0]:
        return
    _INSTALLED[0] = True

    table = {**{n: _elementwise(f) for n, f in UNARY.items()}, **{n: _elementwise(f) for n, f in BINARY.items()},
             **{n: _elementwise(f) for n, f in TERNARY.items()},
             **{n: _elementwise(f, predicate=True) for n, f in PREDICATES.items()}}
    for name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for fn_name, fn in table.items():
            if hasattr(module, fn_name):
                fn.__name__ = fn_name
                setattr(module, fn_name, fn)
