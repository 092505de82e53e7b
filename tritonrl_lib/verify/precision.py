"""One precision policy: which precision a solution computes in, and what that allows.

- The heavy ops a solution keeps in PyTorch (GEMMs, convolutions: policy.py) run on the reference's
  operand dtypes (candidate/heavy_ops.py): a float32 GEMM run on half operands and widened back is
  another op, its speed tensor cores rather than Triton (`cheat:heavy_op_dtype`).
- A solution's own `tl.dot` on float32 operands runs in TF32 unless it says otherwise (Triton's default:
  `input_precision="tf32"`); `launched_precision` reads that from the Triton kernels its forward
  launches and the functions they call (static/reach.py), once per candidate in the pool's static check:
  a `tl.dot` never launched widens nothing. Such a solution on a task whose reference runs float32 GEMMs
  or convolutions is held to a tolerance derived from TF32's own error on every input set: the reference
  phase runs the reference a second time with each heavy op's float32 operands rounded to TF32
  (candidate/tf32.py) and sends that error's largest value and its norm per output; `tf32_tolerance`
  widens atol to TF32_ATOL_FACTOR x the largest, and the norm rule by TF32_NORM_FACTOR x the norm. A
  fused GEMM + bias + tanh whose range set scales the pre-activation by 64 passes (TF32's rounding through
  tanh is that large there), a kernel that is further off than TF32 itself does not. Its verdict says
  `precision: tf32`, and its speed is also measured against the reference timed with TF32 allowed (cuBLAS
  and cuDNN, for the reference's trial only): that precision-matched speedup is the verdict's `speedup`,
  the one the reward pays; the speedup against the float32 reference is reported beside it
  (`timing["speedup_fp32_reference"]`).
- Outputs keep the reference's dtype on every input set the solution accepts (worker/compare.py).
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from .static.facts import ModuleFacts

TF32 = "tf32"
IEEE = "ieee"
TF32_ATOL_FACTOR = 3.0  # atol at least this many times TF32's largest error on the set's output
TF32_NORM_FACTOR = 3.0  # the norm rule's allowance: this many times the norm of TF32's error
_DOT_PRECISION_ARG = 3  # tl.dot(input, other, acc, input_precision, allow_tf32, ...)
_DOT_ALLOW_TF32_ARG = 4


def launched_precision(facts: ModuleFacts, launched: Iterable[str]) -> str:
    """"tf32" when a `tl.dot` (or `@`) in the Triton kernels forward launches (`launched`: static/reach.py),
    or in the functions they call, may run in TF32 on float32 operands; "ieee" when every one there says
    it must not (`input_precision="ieee"`, `allow_tf32=False`); "" when they have none. Only code that
    runs counts: a kernel never launched, dead code outside the kernels, or a `torch.jit.script` function
    cannot widen the tolerance (kernels are recognised as the static check does: facts.py)."""
    found = ""
    for fn in _kernel_code(facts, launched):
        nodes = [n for stmt in fn.body for n in ast.walk(stmt)]  # the body: not its decorators' arguments
        local = facts.bindings.local_aliases(nodes)
        for node in nodes:
            if isinstance(node, ast.Call) and _is_dot(facts, node.func, local):
                if _dot_may_use_tf32(node):
                    return TF32
                found = IEEE
            elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
                return TF32  # `a @ b` on Triton tensors is tl.dot at its default precision
    return found


def _kernel_code(facts: ModuleFacts, launched: Iterable[str]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions behind the launched kernels (`k = triton.jit(fn)`: fn), and those their bodies name,
    transitively: Triton runs a plain function a kernel calls on Triton tensors at compile time (its `@`
    is tl.dot), and calls other kernels. Every function of a name counts (nested ones, namesakes; a
    class's function named through the class), so what a kernel may run is never left out."""
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for f in facts.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
        if id(f) not in facts.method_nodes:  # a kernel names no method by a bare name
            defs.setdefault(f.name, []).append(f)
    todo, seen, out = list(launched), set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fns = list(defs.get(name, []))
        if "." in name:  # `Helper.fn` in a kernel
            cls, attr = name.split(".", 1)
            fns = [m for m in facts.classes[cls].body
                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == attr]
        made = facts.kernels.get(name)
        if isinstance(made, ast.Assign):  # `k = triton.jit(fn)`: the functions and kernels it wraps
            todo.extend(n.id for n in ast.walk(made.value) if isinstance(n, ast.Name))
        for fn in fns:
            out.append(fn)
            for n in (n for stmt in fn.body for n in ast.walk(stmt)):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and (n.id in defs or n.id in facts.kernels):
                    todo.append(n.id)
                elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in facts.classes:
                    todo.append(f"{n.value.id}.{n.attr}")
    return out


def _is_dot(facts: ModuleFacts, func: ast.AST, local: dict[str, str]) -> bool:
    """`tl.dot` under any alias of triton or triton.language (`from triton.language import dot as d`)."""
    q = facts.qualify(func, local)
    if q is None and isinstance(func, ast.Name):
        star = facts.star_names.get(func.id)
        q = f"{star}.{func.id}" if star else None
    parts = (q or "").split(".")
    return parts[0] == "triton" and parts[-1] == "dot"


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
