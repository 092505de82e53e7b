"""How the static check tells host compute in code forward reaches: what is a tensor (as far as
the AST can tell), what runs in a Python loop, and what is a literal.

Host compute is work done in Python or numpy on tensor data, which no op census sees: reading
elements in a loop (`.item()`, `float(x[i])`), iterating a tensor (`for v in x`, `list(x)`,
`map(f, x.reshape(-1))`), and building the result back from host data (`torch.tensor(values)`,
`torch.as_tensor`, `torch.from_numpy`). Scalar reads outside a loop (`x.size(0)`, `int(n)`,
`float(x[0, 0])`) and literal constants (`torch.tensor(0.5)`) stay legitimate.
"""

from __future__ import annotations

import ast
from typing import Callable

from .names import assignments

# Python builtins that iterate their argument.
ITERATING_BUILTINS = frozenset({"list", "tuple", "map", "iter", "enumerate", "zip", "sorted", "filter",
                                "sum", "min", "max", "any", "all", "set", "frozenset", "dict", "reversed"})
# Builtins that read one element to a Python number.
SCALAR_READS = frozenset({"float", "int", "bool", "complex"})
# torch functions that make a tensor from host data (any argument) ...
FROM_HOST = frozenset({"as_tensor", "asarray", "from_numpy", "frombuffer", "from_dlpack"})
# ... and those that do so unless the data is a literal (`torch.tensor(0.5)`, `x.new_tensor([1, 2])`).
FROM_HOST_UNLESS_LITERAL = frozenset({"tensor", "new_tensor"})

# Methods whose result is a tensor of the same data whatever they are called on (so `x.reshape(-1)`
# is iterated element by element), and those whose result is not a tensor to iterate element-wise
# (sizes, Python values, tuples of tensors).
_SAME_DATA_METHODS = frozenset({
    "reshape", "view", "flatten", "ravel", "contiguous", "cpu", "cuda", "detach", "clone", "float",
    "double", "half", "bfloat16", "to", "t", "squeeze", "unsqueeze", "permute", "transpose", "flip",
    "view_as", "reshape_as", "expand", "expand_as", "narrow", "select", "type_as", "abs", "neg",
    "relu", "sigmoid", "tanh", "exp",
})
_NOT_A_TENSOR = frozenset({
    "size", "stride", "dim", "numel", "nelement", "ndimension", "tolist", "item", "unbind", "split",
    "chunk", "tensor_split", "split_with_sizes", "data_ptr", "storage_offset", "element_size",
    "is_contiguous", "get_device", "keys", "values", "items",
})
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})


def loop_body_ids(fn_nodes: list[ast.AST]) -> set[int]:
    """ids of the nodes that run once per iteration of a loop or comprehension (`fn_nodes`: a
    function's nodes)."""
    out: set[int] = set()

    def add(nodes):
        for n in nodes:
            out.update(id(m) for m in ast.walk(n))

    for node in fn_nodes:
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            add(node.body)
            add(node.orelse)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            add([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])
            for i, gen in enumerate(node.generators):
                add(gen.ifs)
                if i:
                    add([gen.iter])
    return out


def is_literal(node: ast.AST, constants: set[str]) -> bool:
    """A constant, a name bound to one at module level, or arithmetic and containers of them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.UnaryOp):
        return is_literal(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return is_literal(node.left, constants) and is_literal(node.right, constants)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(is_literal(e, constants) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("float", "int") \
            and not node.keywords:
        return all(is_literal(a, constants) for a in node.args)
    return False


class TensorNames:
    """Which expressions of one function are tensors, as far as the AST tells: the forward's
    tensor parameters, results of tensor methods and torch functions, slices of them, and the
    names assigned from any of these (in order)."""

    def __init__(self, fn_nodes: list[ast.AST], params: set[str],
                 torch_function: Callable[[ast.AST], str | None], tensor_methods: frozenset[str]):
        self.names = set(params)
        self.torch_function = torch_function  # node -> the torch function it names, or None
        self.tensor_methods = tensor_methods
        for name, value in assignments(fn_nodes):
            if self.is_tensor(value):
                self.names.add(name)

    def is_tensor(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Subscript):
            return self.is_tensor(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr in _TENSOR_ATTRS and self.is_tensor(node.value)
        if isinstance(node, ast.BinOp):
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.is_tensor(node.operand)
        if isinstance(node, ast.Call):
            func = node.func
            name = self.torch_function(func)
            if name is not None:
                return name not in _NOT_A_TENSOR
            if isinstance(func, ast.Attribute):
                if func.attr in _NOT_A_TENSOR:
                    return False
                return func.attr in _SAME_DATA_METHODS or (func.attr in self.tensor_methods
                                                          and self.is_tensor(func.value))
        return False


def forward_tensor_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The forward's positional parameters without a default (KernelBench passes tensors there)."""
    args = fn.args.posonlyargs + fn.args.args
    plain = args[1:len(args) - len(fn.args.defaults)] if len(args) > len(fn.args.defaults) else []
    return {a.arg for a in plain if not _annotated_scalar(a)}


def _annotated_scalar(arg: ast.arg) -> bool:
    return isinstance(arg.annotation, ast.Name) and arg.annotation.id in ("int", "float", "bool", "str")
