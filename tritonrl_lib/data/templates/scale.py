"""Published-scale sizes: the reference a prompt shows, at the sizes benchmarks publish.

The verifier runs a candidate on the CPU under the Triton interpreter, so every pair is verified at
a template's small sizes. The prompt may show the same module with larger constants (KernelBench's
Level 1 publishes batches of 4096-16384 and feature dims of 65536-393216, matmuls of 2048-8192 per
side). A template draws those sizes here, only for dimensions its solution handles generically (a
kernel that loads a whole row in one block keeps its rows short and scales the batch instead), and
a 1D kernel whose published launch passes int32's range computes its offsets in int64.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import random
from typing import Callable, Sequence

from .surface import draw_dims

INT32_SAFE = 2**31 - 2**20  # element counts at or past this need 64-bit offsets (pid * BLOCK wraps near 2**31)
MAX_ELEMENTS = 2**32  # the largest tensor a published-scale prompt shows (16 GiB in fp32)

# Choices by the role of a dimension, large ones repeated so they dominate
BATCH_FLAT = (4096, 4096, 8192, 16384, 16384, 128, 1024, 2048)  # batch of a 2D elementwise input
FEATURES_FLAT = (65536, 131072, 196608, 262144, 393216, 393216, 4096, 16384)  # its features
BATCH = (16, 32, 64, 128, 128, 256)  # leading batch of a 3D / 4D input
ROWS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)  # rows of a row-wise op
ROW_LEN = (256, 512, 1024, 2048, 4096, 4096)  # a row one block loads whole
SEQ = (128, 256, 512, 1024, 2048, 4096)
CHANNELS = (16, 32, 64, 128, 256)
IN_CHANNELS = (3, 3, 8, 16, 32, 64)
SPATIAL = (32, 64, 128, 224, 256, 512)  # height / width of a flat (elementwise) 4D pass
SMALL_PLANE = (16, 24, 32, 48, 64)  # height / width of a plane one block loads whole (H * W <= 4096)
MATMUL_SIDE = (1024, 2048, 2048, 4096, 4096, 8192)
FEATURES = (512, 1024, 2048, 4096, 8192)  # in / out features of a linear layer
GEMM_BATCH = (128, 256, 512, 1024, 2048)


def draw(rng: random.Random, choices: Sequence[Sequence[int]], fits: Callable[[list[int]], bool] | None = None,
         cap: int | None = None, tries: int = 40) -> list[int]:
    """One value per dimension from `choices`, redrawn until `fits` (and a product within `cap`)
    holds; the smallest choices if no draw does."""
    def ok(dims: list[int]) -> bool:
        return (cap is None or math.prod(dims) <= cap) and (fits is None or fits(dims))

    for _ in range(tries):
        dims = [rng.choice(c) for c in choices]
        if ok(dims):
            return dims
    return [min(c) for c in choices]


def _eval(node: ast.AST, values: dict[str, object]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        v = values.get(node.id)
        return v if type(v) is int else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv)):
        a, b = _eval(node.left, values), _eval(node.right, values)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.Add):
            return a + b
        return a - b if isinstance(node.op, ast.Sub) else a // max(b, 1)
    return None


def expr_numel(expr: str, values: dict[str, object]) -> int:
    """Elements of the tensor an input expression draws (`torch.randn(batch_size, dim)`), sizes
    read from `values`; 0 for a number or an expression it cannot size."""
    dims = [_eval(a, values) for a in draw_dims(expr) or []]
    return math.prod(dims) if dims and all(d is not None for d in dims) else 0


def largest_input(inputs: Sequence[tuple[str, str]], values: dict[str, object]) -> int:
    return max((expr_numel(e, values) for _, e in inputs), default=0)


def with_offsets(style, numel: int):
    """The style, made to compute 1D offsets in int64 when a launch over `numel` elements needs it."""
    if numel >= INT32_SAFE and not style.int64:
        return dataclasses.replace(style, int64=True)
    return style


def block_offsets(style, pid: str, block: str, offs: str) -> list[str]:
    """The lines computing a 1D kernel's offsets from its program id: `pid * BLOCK + arange` in
    int32, or one of the int64 forms (the style's `int64`), which stay right past 2**31 elements."""
    arange = f"tl.arange(0, {block})"
    if not style.int64:
        return [f"{offs} = {pid} * {block} + {arange}"]
    if style.phrasing % 2 == 0:
        return [f"{offs} = {pid}.to(tl.int64) * {block} + {arange}"]
    return [f"block_start = {pid}.to(tl.int64) * {block}", f"{offs} = block_start + {arange}"]


def magnitude(numel: int) -> str:
    """A size class of an element count, for reports."""
    if numel <= 0:
        return "unknown"
    for bound, name in ((10**4, "<1e4"), (10**6, "1e4-1e6"), (10**8, "1e6-1e8"), (10**9, "1e8-1e9")):
        if numel < bound:
            return name
    return ">=1e9"
