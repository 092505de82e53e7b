"""The reference module's surface: the ways people write the same PyTorch module.

Plain text helpers that `base.render_reference` assembles a reference from: class docstrings (one
line, a block, "Simple model that ..."), `Args:` / `Returns:` blocks in Google or NumPy form with
the inputs' shapes, a module docstring, comments on constants and in `get_init_inputs`, sizes given
inline in `get_inputs`. None of it changes what the module computes: the target solution stays right.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

# First words of a template's one-sentence doc that read as a verb ("Applies ...", "Computes ...")
_VERBS = {"applies", "adds", "computes", "takes", "multiplies", "scales", "sums", "averages", "returns", "divides",
          "keeps", "gates", "subtracts", "clamps", "squares", "l2-normalises", "performs"}
_PREFIXES = ("Simple model that {}", "A model that {}", "Module that {}", "{}", "Simple model that {}",
             "This module {}")

_TENSOR_DESC = {
    "x": "Input tensor", "inp": "Input tensor", "input": "Input tensor", "input_tensor": "Input tensor",
    "X": "Input tensor", "t": "Input tensor", "tensor": "Input tensor", "inputs": "Input tensor",
    "predictions": "Predicted values", "pred": "Predicted values", "preds": "Predicted values",
    "y_pred": "Predicted values", "output": "Model output", "logits": "Class logits",
    "targets": "Target values", "target": "Target values", "labels": "Target labels", "y_true": "Target values",
    "residual": "Residual tensor added to the result", "weight": "Weight matrix", "w": "Weight tensor",
    "s": "Scalar multiplier", "matrix": "Input matrix", "vector": "Input vector",
}
_ORDINAL = ("First", "Second", "Third", "Fourth")

_PARAM_DESC = {
    "in_features": "Number of input features.", "out_features": "Number of output features.",
    "in_dim": "Size of each input sample.", "out_dim": "Size of each output sample.",
    "input_size": "Size of each input sample.", "hidden_size": "Size of each output sample.",
    "in_channels": "Number of input channels.", "out_channels": "Number of output channels.",
    "in_ch": "Number of input channels.", "C_in": "Number of input channels.",
    "channels": "Number of channels.", "num_features": "Number of channels (features) to normalise.",
    "features": "Number of features.", "kernel_size": "Size of the window.", "stride": "Stride of the window.",
    "num_groups": "Number of groups to divide the channels into.", "eps": "Value added for numerical stability.",
    "scale": "Factor the result is multiplied by.", "scaling_factor": "Factor the result is multiplied by.",
    "shift": "Constant added after scaling.", "negative_slope": "Slope for negative inputs.",
    "alpha": "Scale of the negative branch.", "min_val": "Lower bound of the output.",
    "max_val": "Upper bound of the output.", "divisor": "Value the result is divided by.",
    "add_value": "Constant added to the result.", "scalar": "Scalar multiplier.",
    "dim": "The dimension to operate over.", "reduce_dim": "The dimension to reduce over.",
    "axis": "The dimension to operate over.",
}

_CONSTANT_COMMENT = {
    "batch_size": "batch size", "batch": "batch size", "seq_len": "sequence length",
    "in_features": "input features", "out_features": "output features", "hidden_size": "hidden size",
    "in_channels": "input channels", "out_channels": "output channels", "height": "image height",
    "width": "image width", "kernel_size": "window size", "stride": "window stride",
    "num_groups": "groups for GroupNorm", "num_classes": "number of classes",
}
_INIT_COMMENTS_EMPTY = ("no special initialization inputs needed", "no arguments for the constructor",
                        "Model takes no constructor arguments", "nothing to initialise")
_INIT_COMMENTS = ("constructor arguments", "arguments of Model.__init__", "init args")


def lower_first(text: str) -> str:
    """`Applies ...` as `applies ...`; a word in capitals (`SwiGLU`, `KL`) stays as it is."""
    if len(text) > 1 and text[1].islower():
        return text[0].lower() + text[1:]
    return text


def class_doc(doc: str, phrasing: int) -> str:
    """The class docstring's sentence, in one of the ways people open it."""
    first = doc.split(" ", 1)[0]
    if first.lower() not in _VERBS:
        return doc
    prefix = _PREFIXES[phrasing % len(_PREFIXES)]
    return prefix.format(lower_first(doc) if prefix != "{}" else doc)


def _shape_call(node: ast.AST) -> ast.Call | None:
    """The torch.rand / randn / randint / ones / zeros call inside an input expression."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in ("rand", "randn", "randint", "ones", "zeros", "empty") and \
                ast.unparse(sub.func.value) == "torch":
            return sub
    return None


def draw_dims(expr: str) -> list[ast.expr] | None:
    """The size arguments of the tensor an input expression draws, one node per dimension:
    `torch.randn(b, d)` and `torch.rand((b, d))` give [b, d], `torch.randint(0, n, (b,))` gives [b];
    None for an expression that draws no tensor (a number) or does not parse."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    call = _shape_call(node)
    if call is None:
        return None
    args = list(call.args)
    if call.func.attr == "randint":  # randint(low, high, size) or randint(high, size)
        args = args[2:] if len(args) > 2 else args[1:]
    if args and isinstance(args[0], (ast.Tuple, ast.List)):  # the shape as one sequence
        args = list(args[0].elts)
    return args


def shape_of(expr: str) -> str | None:
    """The shape an input expression draws, as written: `(batch_size, dim)`; None for a number."""
    args = draw_dims(expr)
    if args is None:
        return None
    dims = [ast.unparse(a) for a in args]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def is_number(expr: str) -> bool:
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def input_description(name: str, index: int, count: int, expr: str) -> tuple[str, str]:
    """(type, description) of a forward argument, with its shape when the input is a tensor."""
    if is_number(expr):
        return "float", _TENSOR_DESC.get(name, "Scalar value") + "."
    what = _TENSOR_DESC.get(name)
    if what is None:
        what = f"{_ORDINAL[index]} input tensor" if count > 1 and index < len(_ORDINAL) else "Input tensor"
    if "randint" in expr:
        what = "Class indices" if name in ("targets", "target", "labels", "y_true") else what
    shape = shape_of(expr)
    return "torch.Tensor", f"{what} of shape {shape}." if shape else f"{what}."


def param_description(name: str, annotation: str, docs: dict[str, str]) -> str:
    if name in docs:
        return docs[name]
    if name in _PARAM_DESC:
        return _PARAM_DESC[name]
    words = name.replace("_", " ")
    return f"Size of the {words} dimension." if annotation == "int" else f"The {words}."


def docstring(body: Sequence[str], indent: str, one_line: bool = False) -> list[str]:
    """A docstring at `indent`: `\"\"\"text\"\"\"` on one line, or opening and closing quotes on lines
    of their own around `body`."""
    if one_line and len(body) == 1:
        return [f'{indent}"""{body[0]}"""']
    return [f'{indent}"""'] + [f"{indent}{ln}" if ln else "" for ln in body] + [f'{indent}"""']


def args_block(kind: str, summary: str, args: Sequence[tuple[str, str, str]],
               returns: tuple[str, str] | None) -> list[str]:
    """The body of a docstring documenting `args` (name, type, description) and what is returned,
    in Google form (`x (torch.Tensor): ...`), untyped (`x: ...`, KernelBench's) or NumPy form."""
    lines = [summary] if summary else []
    if kind == "numpy":
        if args:
            lines += ["", "Parameters", "----------"]
            for name, typ, desc in args:
                lines += [f"{name} : {typ}", f"    {desc}"]
        if returns:
            lines += ["", "Returns", "-------", returns[0], f"    {returns[1]}"]
    else:
        if args:
            lines += ["", "Args:"]
            for name, typ, desc in args:
                lines.append(f"    {name} ({typ}): {desc}" if kind == "google" else f"    {name}: {desc}")
        if returns:
            lines += ["", "Returns:", f"    {returns[0]}: {returns[1]}" if kind == "google" else f"    {returns[1]}"]
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def returns_text(forward_doc: str) -> str:
    text = forward_doc.strip() or "the result."
    return text[0].upper() + text[1:]


def constant_comment(name: str, phrasing: int) -> str:
    """A trailing comment for a size constant, for some names and phrasings; "" for none."""
    what = _CONSTANT_COMMENT.get(name)
    if what is None or phrasing % 3 == 2:
        return ""
    return f"  # {what}"


def init_inputs_comment(empty: bool, phrasing: int) -> str:
    options = _INIT_COMMENTS_EMPTY if empty else _INIT_COMMENTS
    return f"  # {options[phrasing % len(options)]}"


def _name_pattern(name: str) -> re.Pattern:
    # the name as a value: not an attribute (`.dim`), not a keyword argument (`dim=-1`)
    return re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)(?!\s*=(?!=))")


def mentions(text: str, name: str) -> bool:
    return bool(_name_pattern(name).search(text))


def substitute(expr: str, values: dict[str, object]) -> str:
    """`expr` with each named constant written as its number."""
    for name, value in values.items():
        expr = _name_pattern(name).sub(repr(value), expr)
    return expr


def inline_candidates(constants: Sequence[tuple[str, object]], input_exprs: Sequence[str],
                      elsewhere: str) -> list[str]:
    """Int constants only the input expressions read, in order: they can be written inline."""
    out = []
    for name, value in constants:
        if type(value) is not int:
            continue
        if any(mentions(e, name) for e in input_exprs) and not mentions(elsewhere, name):
            out.append(name)
    return out


def rand_for_randn(expr: str) -> str:
    """`torch.rand(...)` for a plain `torch.randn(...)` input (a draw in [0, 1) suits every op a
    template marks so); anything else unchanged."""
    head = "torch.randn("
    if not (expr.startswith(head) and expr.endswith(")")):
        return expr
    depth = 1
    for i in range(len(head), len(expr)):
        depth += (expr[i] == "(") - (expr[i] == ")")
        if depth == 0 and i < len(expr) - 1:
            return expr  # `torch.randn(...) + 0.5`: not a plain draw
    return "torch.rand(" + expr[len(head):]
