"""Elementwise templates: Level-1 elementwise and activation families, Level-2 elementwise chains.

One flat kernel serves them all (Triton tutorial 01's shape: one program per BLOCK of elements,
masked loads and stores); a family supplies its reference formulations and the Triton lines that
compute `out` from the loaded values. Parameters of shape (dim,) broadcast along the last axis and
are read at `offset % dim`.
"""

from __future__ import annotations

import builtins
import random
from dataclasses import dataclass, field
from typing import Callable

from . import scale
from .base import (Example, avoid_clashes, free_names, needs_fp32, RefSpec, SolSpec, Style, TemplateInfo, comment, fp32,
                   grid_1d, rand, randn, make_example, widen)

# Names of the inputs, by arity; the n-th scheme of each arity is used together.
INPUT_NAMES = {
    1: [("x",), ("x",), ("inp",), ("input_tensor",), ("t",), ("x",), ("input",), ("X",), ("x",), ("tensor",),
        ("inputs",)],
    2: [("a", "b"), ("x", "y"), ("x1", "x2"), ("lhs", "rhs"), ("x", "other"), ("a", "b"), ("A", "B"),
        ("input", "other"), ("tensor1", "tensor2"), ("x", "y")],
    3: [("x", "y", "z"), ("a", "b", "c"), ("x", "w", "bias_in"), ("x1", "x2", "x3"), ("input", "tensor1", "tensor2")],
}
SIZE_NAMES_2D = [("batch_size", "dim"), ("N", "D"), ("rows", "cols"), ("batch_size", "features"),
                 ("batch", "hidden"), ("M", "N"), ("batch_size", "dim"), ("batch_size", "hidden_size"),
                 ("B", "D"), ("batch_size", "num_features"), ("n_rows", "n_cols")]
SIZE_NAMES_3D = [("batch_size", "seq_len", "dim"), ("B", "T", "C"), ("batch_size", "channels", "length"),
                 ("batch", "heads", "features"), ("batch_size", "dim1", "dim2"), ("N", "L", "D")]
SIZE_NAMES_4D = [("batch_size", "channels", "height", "width"), ("N", "C", "H", "W"),
                 ("batch", "heads", "seq_len", "head_dim"), ("batch_size", "features", "dim1", "dim2"),
                 ("B", "C", "H", "W")]
# published scale per rank: (choices per dim), the product kept under scale.MAX_ELEMENTS
PUBLISHED = {2: (scale.BATCH_FLAT, scale.FEATURES_FLAT),
             3: (scale.BATCH, scale.SEQ, (1024, 2048, 4096, 8192, 65536)),
             4: (scale.BATCH, (3, 16, 32, 64), scale.SPATIAL, scale.SPATIAL)}
OUT_NAMES = ("out", "y_out", "result", "output", "out")


@dataclass
class Names:
    """The identifiers one example uses."""

    inputs: tuple[str, ...]
    sizes: tuple[str, ...]
    out: str
    style: Style

    def v(self, i: int) -> str:  # the loaded value of input i inside the kernel
        return self.inputs[i]


@dataclass
class RefForm:
    """One way to write the reference: extra __init__ lines (reference only) and forward lines."""

    forward: Callable[[Names], list[str]]
    init: Callable[[Names], list[str]] = lambda n: []


@dataclass
class EwFamily:
    family: str
    doc: str
    forms: list[RefForm]
    compute: list[Callable[[Names], list[str]]]  # kernel lines assigning n.out from the loaded values
    arity: int = 1
    scalars: list[tuple[str, tuple]] = field(default_factory=list)  # constructor floats: (name, choices)
    vectors: list[tuple[str, str]] = field(default_factory=list)  # Parameters (dim,): (attr, init scale)
    input_kind: tuple[str, ...] = ("randn",)  # per input: randn | positive | sign
    broadcast_ok: bool = False  # the second input may be a (dim,) row vector
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    level: int = 1
    description: str = ""


def _ret(expr: str) -> Callable[[Names], list[str]]:
    return lambda n: [f"return {expr.format(*n.inputs, **_attrs(n))}"]


def _attrs(n: Names) -> dict[str, str]:
    return {"out": n.out}


def _c(expr: str) -> Callable[[Names], list[str]]:
    """A one-line Triton computation; {0}, {1} are the loaded inputs, {out} the result."""
    return lambda n: [f"{n.out} = {expr.format(*n.inputs, out=n.out)}"]


MODULE_ATTRS = ("act", "activation", "{}", "act", "fn")


def _module(init: str, call: str = "self.act({0})") -> RefForm:
    """A layer held as an attribute (`self.act = nn.ReLU()`), its name one of MODULE_ATTRS."""
    def attr(n: Names) -> str:
        return n.style.pick_name(MODULE_ATTRS, salt=5).format(init.split("(")[0].split(".")[-1].lower())

    return RefForm(init=lambda n: [f"self.{attr(n)} = {init}"],
                   forward=lambda n: [f"return {call.replace('self.act', 'self.' + attr(n)).format(*n.inputs)}"])


TANH = "2.0 * tl.sigmoid(2.0 * {0}) - 1.0"

FAMILIES: list[EwFamily] = [
    # ---------------------------------------------------------------- elementwise
    EwFamily("add", "Adds two tensors element by element.",
             [RefForm(_ret("{0} + {1}")), RefForm(_ret("torch.add({0}, {1})")), RefForm(_ret("{0}.add({1})"))],
             [_c("{0} + {1}")], arity=2, broadcast_ok=True),
    EwFamily("mul", "Multiplies two tensors element by element.",
             [RefForm(_ret("{0} * {1}")), RefForm(_ret("torch.mul({0}, {1})")), RefForm(_ret("torch.multiply({0}, {1})"))],
             [_c("{0} * {1}")], arity=2, broadcast_ok=True),
    EwFamily("sub", "Subtracts the second tensor from the first, element by element.",
             [RefForm(_ret("{0} - {1}")), RefForm(_ret("torch.sub({0}, {1})")), RefForm(_ret("torch.subtract({0}, {1})"))],
             [_c("{0} - {1}")], arity=2, broadcast_ok=True),
    EwFamily("div", "Divides the first tensor by the second, element by element.",
             [RefForm(_ret("{0} / {1}")), RefForm(_ret("torch.div({0}, {1})")), RefForm(_ret("torch.true_divide({0}, {1})"))],
             [_c("{0} / {1}")], arity=2, input_kind=("randn", "positive"), broadcast_ok=True),
    EwFamily("scale_shift", "Scales the input by a constant and adds a constant shift.",
             [RefForm(lambda n: [f"return {n.inputs[0]} * self.scale + self.shift"]),
              RefForm(lambda n: [f"return torch.add(torch.mul({n.inputs[0]}, self.scale), self.shift)"])],
             [lambda n: [f"{n.out} = {n.inputs[0]} * scale + shift"]],
             scalars=[("scale", (0.5, 2.0, 1.5, -1.0, 3.0)), ("shift", (0.1, -0.5, 1.0, 0.25))]),
    EwFamily("clamp", "Clamps every element into [min_val, max_val].",
             [RefForm(lambda n: [f"return torch.clamp({n.inputs[0]}, min=self.min_val, max=self.max_val)"]),
              RefForm(lambda n: [f"return {n.inputs[0]}.clamp(self.min_val, self.max_val)"]),
              RefForm(lambda n: [f"return torch.clip({n.inputs[0]}, self.min_val, self.max_val)"])],
             [lambda n: [f"{n.out} = tl.minimum(tl.maximum({n.inputs[0]}, min_val), max_val)"]],
             scalars=[("min_val", (-0.5, -1.0, -0.25, 0.0)), ("max_val", (0.5, 1.0, 2.0, 0.75))]),
    EwFamily("abs", "Takes the absolute value of every element.",
             [RefForm(_ret("torch.abs({0})")), RefForm(_ret("{0}.abs()")), RefForm(_ret("torch.absolute({0})"))],
             [_c("tl.abs({0})"), _c("tl.where({0} < 0, -{0}, {0})")]),
    EwFamily("square", "Squares every element.",
             [RefForm(_ret("{0} * {0}")), RefForm(_ret("torch.square({0})")), RefForm(_ret("{0} ** 2")),
              RefForm(_ret("torch.pow({0}, 2)"))],
             [_c("{0} * {0}")]),
    EwFamily("where_positive", "Keeps the first input where it is positive and takes the second elsewhere.",
             [RefForm(_ret("torch.where({0} > 0, {0}, {1})"))],
             [_c("tl.where({0} > 0, {0}, {1})")], arity=2),
    # ---------------------------------------------------------------- activations
    EwFamily("relu", "Applies ReLU, max(x, 0), to every element.",
             [RefForm(_ret("torch.relu({0})")), RefForm(_ret("F.relu({0})")), _module("nn.ReLU()"),
              RefForm(_ret("{0}.clamp(min=0)")), RefForm(_ret("{0}.relu()")), _module("nn.ReLU(inplace=False)"),
              RefForm(_ret("torch.nn.functional.relu({0})"))],
             [_c("tl.maximum({0}, 0.0)"), _c("tl.where({0} > 0, {0}, 0.0)")]),
    EwFamily("leaky_relu", "Applies LeakyReLU with a given negative slope.",
             [RefForm(lambda n: [f"return F.leaky_relu({n.inputs[0]}, negative_slope=self.negative_slope)"]),
              RefForm(lambda n: [f"return torch.nn.functional.leaky_relu({n.inputs[0]}, self.negative_slope)"]),
              _module("nn.LeakyReLU(negative_slope=negative_slope)")],
             [lambda n: [f"{n.out} = tl.where({n.inputs[0]} > 0, {n.inputs[0]}, {n.inputs[0]} * negative_slope)"]],
             scalars=[("negative_slope", (0.01, 0.1, 0.2, 0.05))]),
    EwFamily("gelu", "Applies the GELU activation (erf form).",
             [RefForm(_ret("F.gelu({0})")), RefForm(_ret("torch.nn.functional.gelu({0})")), _module("nn.GELU()"),
              RefForm(_ret("F.gelu({0}, approximate=\"none\")"))],
             [_c("0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))")]),
    EwFamily("silu", "Applies SiLU (swish), x * sigmoid(x).",
             [RefForm(_ret("F.silu({0})")), RefForm(_ret("{0} * torch.sigmoid({0})")), _module("nn.SiLU()"),
              RefForm(_ret("torch.nn.functional.silu({0})")), RefForm(_ret("{0} * {0}.sigmoid()"))],
             [_c("{0} * tl.sigmoid({0})"), _c("{0} / (1.0 + tl.exp(-{0}))")]),
    EwFamily("sigmoid", "Applies the logistic sigmoid.",
             [RefForm(_ret("torch.sigmoid({0})")), RefForm(_ret("{0}.sigmoid()")), _module("nn.Sigmoid()"),
              RefForm(_ret("F.sigmoid({0})"))],
             [_c("tl.sigmoid({0})"), _c("1.0 / (1.0 + tl.exp(-{0}))")]),
    EwFamily("tanh", "Applies the hyperbolic tangent.",
             [RefForm(_ret("torch.tanh({0})")), RefForm(_ret("{0}.tanh()")), _module("nn.Tanh()"),
              RefForm(_ret("F.tanh({0})"))],
             [_c(TANH),
              lambda n: [f"decay = tl.exp(-2.0 * tl.abs({n.inputs[0]}))", "th = (1.0 - decay) / (1.0 + decay)",
                         f"{n.out} = tl.where({n.inputs[0]} >= 0, th, -th)"]]),
    EwFamily("elu", "Applies ELU with scale alpha for negative inputs.",
             [RefForm(lambda n: [f"return F.elu({n.inputs[0]}, alpha=self.alpha)"]), _module("nn.ELU(alpha=alpha)"),
              RefForm(lambda n: [f"return torch.nn.functional.elu({n.inputs[0]}, self.alpha)"])],
             [lambda n: [f"{n.out} = tl.where({n.inputs[0]} > 0, {n.inputs[0]}, "
                         f"alpha * (tl.exp(tl.minimum({n.inputs[0]}, 0.0)) - 1.0))"]],
             scalars=[("alpha", (1.0, 0.5, 1.5, 2.0))]),
    EwFamily("softplus", "Applies Softplus, log(1 + exp(x)).",
             [RefForm(_ret("F.softplus({0})")), _module("nn.Softplus()"),
              RefForm(_ret("torch.nn.functional.softplus({0})"))],
             [_c("tl.where({0} > 20.0, {0}, tl.log(1.0 + tl.exp(tl.minimum({0}, 20.0))))")]),
    EwFamily("hardtanh", "Applies HardTanh, clamping to [min_val, max_val].",
             [RefForm(lambda n: [f"return F.hardtanh({n.inputs[0]}, min_val=self.min_val, max_val=self.max_val)"]),
              _module("nn.Hardtanh(min_val=min_val, max_val=max_val)"),
              RefForm(lambda n: [f"return torch.clamp({n.inputs[0]}, self.min_val, self.max_val)"])],
             [lambda n: [f"{n.out} = tl.minimum(tl.maximum({n.inputs[0]}, min_val), max_val)"]],
             scalars=[("min_val", (-1.0, -2.0, -0.5)), ("max_val", (1.0, 2.0, 0.5))]),
    EwFamily("hardsigmoid", "Applies HardSigmoid, clamp(x / 6 + 1/2, 0, 1).",
             [RefForm(_ret("F.hardsigmoid({0})")), _module("nn.Hardsigmoid()"),
              RefForm(_ret("torch.nn.functional.hardsigmoid({0})"))],
             [_c("tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)")]),
    EwFamily("hardswish", "Applies HardSwish, x * clamp(x + 3, 0, 6) / 6.",
             [RefForm(_ret("F.hardswish({0})")), _module("nn.Hardswish()"),
              RefForm(_ret("torch.nn.functional.hardswish({0})"))],
             [_c("{0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0")]),
    EwFamily("selu", "Applies SELU.",
             [RefForm(_ret("torch.selu({0})")), RefForm(_ret("F.selu({0})")), _module("nn.SELU()"),
              RefForm(_ret("torch.nn.functional.selu({0})"))],
             [_c("1.0507009873554805 * tl.where({0} > 0, {0}, "
                 "1.6732632423543772 * (tl.exp(tl.minimum({0}, 0.0)) - 1.0))")]),
    EwFamily("mish", "Applies Mish, x * tanh(softplus(x)).",
             [RefForm(_ret("F.mish({0})")), RefForm(_ret("{0} * torch.tanh(F.softplus({0}))")), _module("nn.Mish()")],
             [lambda n: [f"sp = tl.where({n.inputs[0]} > 20.0, {n.inputs[0]}, "
                         f"tl.log(1.0 + tl.exp(tl.minimum({n.inputs[0]}, 20.0))))",
                         f"{n.out} = {n.inputs[0]} * (2.0 * tl.sigmoid(2.0 * sp) - 1.0)"]]),
    EwFamily("softsign", "Applies Softsign, x / (1 + |x|).",
             [RefForm(_ret("F.softsign({0})")), RefForm(_ret("{0} / (1 + torch.abs({0}))")), _module("nn.Softsign()")],
             [_c("{0} / (1.0 + tl.abs({0}))")]),
    # ---------------------------------------------------------------- Level 2: elementwise chains
    EwFamily("scale_bias_tanh", "Scales the input, adds a learned bias, then applies tanh.",
             [RefForm(lambda n: [f"{n.inputs[0]} = {n.inputs[0]} * self.scale", f"{n.inputs[0]} = {n.inputs[0]} + self.bias",
                                 f"return torch.tanh({n.inputs[0]})"]),
              RefForm(lambda n: [f"return torch.tanh({n.inputs[0]} * self.scale + self.bias)"])],
             [lambda n: [f"{n.out} = {n.inputs[0]} * scale + bias", f"{n.out} = {TANH.format(n.out)}"]],
             scalars=[("scale", (0.5, 2.0, 1.5))], vectors=[("bias", "0.1")], level=2,
             description="fused scale, bias and tanh"),
    EwFamily("mul_add_clamp", "Computes x * y + z and clamps the result into [min_val, max_val].",
             [RefForm(lambda n: [f"out = {n.inputs[0]} * {n.inputs[1]} + {n.inputs[2]}",
                                 "return torch.clamp(out, self.min_val, self.max_val)"]),
              RefForm(lambda n: [f"return torch.clamp(torch.addcmul({n.inputs[2]}, {n.inputs[0]}, {n.inputs[1]}), "
                                 "min=self.min_val, max=self.max_val)"])],
             [lambda n: [f"{n.out} = {n.inputs[0]} * {n.inputs[1]} + {n.inputs[2]}",
                         f"{n.out} = tl.minimum(tl.maximum({n.out}, min_val), max_val)"]],
             arity=3, scalars=[("min_val", (-1.0, -0.5, -2.0)), ("max_val", (1.0, 0.5, 2.0))], level=2,
             description="multiply-add then clamp, fused"),
    EwFamily("sigmoid_gate", "Gates the input by the sigmoid of a second tensor.",
             [RefForm(_ret("{0} * torch.sigmoid({1})")), RefForm(_ret("torch.mul({0}, {1}.sigmoid())")),
              _module("nn.Sigmoid()", "{0} * self.act({1})")],
             [_c("{0} * tl.sigmoid({1})")], arity=2, level=2, description="sigmoid gating"),
    EwFamily("residual_relu_scale", "Adds a residual, applies ReLU and scales the result.",
             [RefForm(lambda n: [f"{n.inputs[0]} = {n.inputs[0]} + {n.inputs[1]}",
                                 f"{n.inputs[0]} = torch.relu({n.inputs[0]})", f"return {n.inputs[0]} * self.scale"]),
              RefForm(lambda n: [f"return F.relu({n.inputs[0]} + {n.inputs[1]}) * self.scale"]),
              RefForm(lambda n: [f"return torch.relu({n.inputs[0]} + {n.inputs[1]}).mul(self.scale)"])],
             [lambda n: [f"{n.out} = tl.maximum({n.inputs[0]} + {n.inputs[1]}, 0.0) * scale"]],
             arity=2, scalars=[("scale", (0.5, 2.0, 0.1, 1.5))], level=2, description="residual add, ReLU, scale"),
]


def _input_expr(kind: str, shape: list[str], dtype: str) -> str:
    if kind == "positive":
        return rand(shape, dtype, " + 0.5")
    return randn(shape, dtype)


def _launcher_name(family: str, style: Style) -> str:
    name = style.pick_name(("{}", "triton_{}", "{}_forward", "launch_{}", "{}"), salt=3).format(family)
    if hasattr(builtins, name) or name in ("add", "mul", "sub", "div"):
        name = f"triton_{family}"
    if name == style.kernel(family):
        name = f"launch_{family}"
    return name


def render_family(fam: EwFamily, rng: random.Random, dtype: str, style: Style) -> Example:
    style = avoid_clashes(style, [*INPUT_NAMES[fam.arity][style.names % len(INPUT_NAMES[fam.arity])],
                                  *style.pick_name(SIZE_NAMES_2D), *style.pick_name(SIZE_NAMES_3D),
                                  *style.pick_name(SIZE_NAMES_4D)])
    n = Names(inputs=INPUT_NAMES[fam.arity][style.names % len(INPUT_NAMES[fam.arity])], sizes=(),
              out=style.pick(OUT_NAMES, salt=1), style=style)
    rank = rng.choice((2, 2, 3, 4))
    schemes = {2: SIZE_NAMES_2D, 3: SIZE_NAMES_3D, 4: SIZE_NAMES_4D}[rank]
    sizes = free_names(style, schemes, n.inputs)
    n.sizes = sizes
    dims = [rng.choice((2, 4, 8, 16) if rank == 2 else (2, 4))] + [rng.choice((3, 4, 5)) for _ in range(rank - 2)]
    dims.append(rng.choice((17, 32, 64, 100, 128, 200, 256) if rank < 4 else (7, 16, 33, 64)))
    constants: list[tuple[str, object]] = list(zip(sizes, dims))
    shape = list(sizes)
    last = sizes[-1]
    broadcast = fam.broadcast_ok and rng.random() < 0.3

    scalars = [(name, widen(rng.choice(choices), rng)) for name, choices in fam.scalars]
    init_params = [(name, "float") for name, _ in scalars]
    init_lines = [f"self.{name} = {name}" for name, _ in scalars]
    init_inputs = [name for name, _ in scalars]
    constants += scalars
    for attr, init_scale in fam.vectors:
        init_params.insert(0, (last, "int"))
        init_inputs.insert(0, last)
        init_lines.append(f"self.{attr} = nn.Parameter(torch.randn({last}) * {init_scale})")

    form = style.pick(fam.forms)
    ref_init = init_lines + form.init(n)
    inputs = []
    for i, name in enumerate(n.inputs):
        kind = fam.input_kind[i] if i < len(fam.input_kind) else "randn"
        shp = [last] if (broadcast and i == 1) else shape
        inputs.append((name, _input_expr(kind, shp, dtype)))
    uses_f = any("F." in ln for ln in form.forward(n))
    ref = RefSpec(doc=fam.doc, init_params=init_params, init_lines=ref_init, forward_args=list(n.inputs),
                  forward_lines=form.forward(n), constants=constants, inputs=inputs, init_inputs=init_inputs,
                  forward_doc=f"a tensor shaped like {n.inputs[0]}.",
                  imports=["import torch.nn.functional as F"] if uses_f else [],
                  arg_docs={last: "Size of the last dimension (the learned bias's length)."} if fam.vectors else {})
    if style.sizes == "published":  # a flat kernel: every dimension scales, offsets in int64 past 2**31
        ref.published = dict(zip(sizes, scale.draw(rng, PUBLISHED[rank], cap=scale.MAX_ELEMENTS)))
        style = scale.with_offsets(style, scale.largest_input(inputs, {**dict(constants), **ref.published}))

    kernel_name = style.kernel(fam.family)
    needs_col = broadcast or bool(fam.vectors)
    ptrs = [style.ptr(x) for x in n.inputs]
    vec_ptrs = [style.ptr(attr) for attr, _ in fam.vectors]
    out_ptr = style.ptr(n.out)
    args = ptrs + vec_ptrs + [out_ptr, style.numel] + ([last] if needs_col else []) + [s for s, _ in scalars]
    o, m, b = style.offs, style.mask, style.block
    if style.loop:  # a capped grid: each program walks the blocks pid, pid + programs, ...
        head = [f"{style.pid} = tl.program_id(axis=0)", "num_programs = tl.num_programs(axis=0)"]
        body = [f"{o} = start + tl.arange(0, {b})", f"{m} = {o} < {style.numel}"]
    else:
        head = []
        body = [f"{style.pid} = tl.program_id(axis=0)", *scale.block_offsets(style, style.pid, b, o),
                f"{m} = {o} < {style.numel}"]
    if needs_col:
        body.append(f"col = {o} % {last}")
    compute = style.pick(fam.compute, salt=2)(n)
    force = needs_fp32(compute)
    for i, (x, p) in enumerate(zip(n.inputs, ptrs)):
        idx = "col" if (broadcast and i == 1) else o
        body.append(f"{x} = {fp32(style, dtype, f'tl.load({p} + {idx}, mask={m}, other=0.0)', force)}")
    for (attr, _), p in zip(fam.vectors, vec_ptrs):
        body.append(f"{attr} = {fp32(style, dtype, f'tl.load({p} + col, mask={m}, other=0.0)', force)}")
    body += compute
    body.append(f"tl.store({out_ptr} + {o}, {n.out}, mask={m})")
    if style.loop:
        first_block = f"{style.pid}.to(tl.int64) * {b}" if style.int64 else f"{style.pid} * {b}"
        lines = head + [f"for start in range({first_block}, {style.numel}, num_programs * {b}):"] \
            + [f"    {ln}" for ln in body]
        what = "each program walks every num_programs-th block of elements"
    else:
        lines, what = body, "each program handles one contiguous block of elements"
    kernel = ("@triton.jit\n"
              f"def {kernel_name}({', '.join(args)}, {b}: tl.constexpr):\n"
              + comment(style, what)
              + "\n".join(f"    {ln}" for ln in lines) + "\n")

    launch_args = list(n.inputs) + [f"self.{attr}" for attr, _ in fam.vectors]
    call_scalars = [f"self.{s}" for s, _ in scalars]
    first = n.inputs[0]
    launch = [f"{x} = {x}.contiguous()" for x in n.inputs]
    launch += [f"{n.out} = torch.empty_like({first})", f"{style.numel} = {n.out}.numel()"]
    if needs_col:
        launch.append(f"{last} = {first}.shape[-1]")
    launch.append(f"grid = {grid_1d(style, style.numel, loop=style.loop)}")
    kargs = launch_args + [n.out, style.numel] + ([last] if needs_col else [])
    launcher_fn = _launcher_name(fam.family, style)
    if style.launcher == "function":
        params = list(n.inputs) + [attr for attr, _ in fam.vectors] + [s for s, _ in scalars]
        fn_launch = [ln.replace("self.", "") for ln in launch]
        call = (f"{kernel_name}[grid]({', '.join([*[a.replace('self.', '') for a in kargs], *[s for s, _ in scalars]])}, "
                f"{b}={style.block_size})")
        helper = (f"def {launcher_fn}({', '.join(params)}):\n"
                  + ("    \"\"\"Launches the kernel over every element.\"\"\"\n" if style.sol_docstrings else "")
                  + "\n".join(f"    {ln}" for ln in fn_launch) + f"\n    {call}\n    return {n.out}\n")
        helpers = [helper]
        forward = [f"return {launcher_fn}({', '.join(launch_args + call_scalars)})"]
    else:
        helpers = []
        forward = launch + [f"{kernel_name}[grid]({', '.join(kargs + call_scalars)}, {b}={style.block_size})",
                            f"return {n.out}"]
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    shape_desc = {k: v for k, v in zip(sizes, dims)}
    if broadcast:
        shape_desc["broadcast"] = 1
    return make_example(fam.family, ref, sol, style, fam.description or fam.doc, dtype, shape_desc)


def templates() -> list[TemplateInfo]:
    out = []
    for fam in FAMILIES:
        # learned parameters are fp32, and the reference runs as written: such tasks stay fp32
        dtypes = ("float32",) if fam.vectors else fam.dtypes
        out.append(TemplateInfo(fam.family, lambda rng, dtype, style, fam=fam: render_family(fam, rng, dtype, style),
                                dtypes))
    return out
