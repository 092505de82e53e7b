"""One precision policy: which precision a solution computes in, and what that allows.

- The heavy ops a solution keeps in PyTorch (GEMMs, convolutions: policy.py) run on the reference's
  operand dtypes (candidate/heavy_ops.py): a float32 GEMM run on half operands and widened back is
  another op, its speed tensor cores rather than Triton (`cheat:heavy_op_dtype`).
- A solution's own `tl.dot` on float32 operands runs in TF32 unless it says otherwise (Triton's default:
  `input_precision="tf32"`); `candidate_precision` reads that from its source. Such a solution on a task
  whose reference runs float32 GEMMs or convolutions is held to a tolerance derived from TF32's own error
  on every input set: the reference phase runs the reference a second time with each heavy op's float32
  operands rounded to TF32 (candidate/tf32.py) and sends that error's largest value and its norm per
  output; `tf32_tolerance` widens atol to TF32_ATOL_FACTOR x the largest, and the norm rule by
  TF32_NORM_FACTOR x the norm. A fused GEMM + bias + tanh whose range set scales the pre-activation by 64
  passes (TF32's rounding through tanh is that large there), a kernel that is further off than TF32
  itself does not. Its verdict says `precision: tf32`, and its speed is also measured against the
  reference timed with TF32 allowed (cuBLAS and cuDNN, for the reference's trial only): that
  precision-matched speedup is the verdict's `speedup`, the one the reward pays; the speedup against the
  float32 reference is reported beside it (`timing["speedup_fp32_reference"]`).
- Outputs keep the reference's dtype on every input set the solution accepts (worker/compare.py).
"""

from __future__ import annotations

import ast
import math
from typing import Any

TF32 = "tf32"
IEEE = "ieee"
TF32_ATOL_FACTOR = 3.0  # atol at least this many times TF32's largest error on the set's output
TF32_NORM_FACTOR = 3.0  # the norm rule's allowance: this many times the norm of TF32's error
_DOT_PRECISION_ARG = 3  # tl.dot(input, other, acc, input_precision, allow_tf32, ...)
_DOT_ALLOW_TF32_ARG = 4


def candidate_precision(code: str) -> str:
    """"tf32" when a `tl.dot` (or `@` in a Triton kernel) of the solution may run in TF32 on float32
    operands, "ieee" when every one says it must not (`input_precision="ieee"`, `allow_tf32=False`), ""
    when it has none (or does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return ""
    language, dots = _language_names(tree)
    found = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_dot(node.func, language, dots):
            if _dot_may_use_tf32(node):
                return TF32
            found = IEEE
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_kernel(node):
            if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(node)):
                return TF32  # `a @ b` on Triton tensors is tl.dot at its default precision
    return found


def _language_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names bound to triton.language (`tl`), and to its dot itself."""
    language, dots = {"triton.language"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton.language":
                    language.update([a.asname or a.name])
                elif a.name == "triton":
                    language.update([f"{a.asname or a.name}.language"])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module == "triton" and a.name == "language":
                    language.update([a.asname or a.name])
                elif node.module == "triton.language" and a.name == "dot":
                    dots.update([a.asname or a.name])
    return language, dots


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _is_dot(func: ast.AST, language: set[str], dots: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in dots
    return isinstance(func, ast.Attribute) and func.attr == "dot" and _dotted(func.value) in language


def _is_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("jit" in _dotted(d.func if isinstance(d, ast.Call) else d) for d in fn.decorator_list)


def _dot_may_use_tf32(call: ast.Call) -> bool:
    precision = next((k.value for k in call.keywords if k.arg == "input_precision"), None)
    allow = next((k.value for k in call.keywords if k.arg == "allow_tf32"), None)
    if precision is None and len(call.args) > _DOT_PRECISION_ARG:
        precision = call.args[_DOT_PRECISION_ARG]
    if allow is None and len(call.args) > _DOT_ALLOW_TF32_ARG:
        allow = call.args[_DOT_ALLOW_TF32_ARG]
    if isinstance(precision, ast.Constant) and precision.value is not None:
        return str(precision.value).lower() != IEEE
    if precision is not None:
        return True  # chosen at run time: it may be TF32
    if isinstance(allow, ast.Constant) and allow.value is False:
        return False
    return True  # Triton's default


def tf32_tolerance(atol: float, error: Any) -> tuple[float, float]:
    """(atol, the norm rule's allowance) for an output whose TF32 error on its set is `error`: [largest
    |difference|, ||difference||_2] between the reference with TF32-rounded heavy operands and the
    reference itself (no allowance where it is missing or malformed)."""
    if not (isinstance(error, (list, tuple)) and len(error) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                    for x in error)):
        return atol, 0.0
    largest, norm = float(error[0]), float(error[1])
    return max(atol, TF32_ATOL_FACTOR * largest), TF32_NORM_FACTOR * norm


def float32_heavy(heavy_dtypes: Any) -> bool:
    """Whether a reference's heavy calls on an input set (heavy_ops.operand_dtypes) take float32 operands."""
    return isinstance(heavy_dtypes, dict) and any(
        isinstance(v, list) and "float32" in v for v in heavy_dtypes.values())
