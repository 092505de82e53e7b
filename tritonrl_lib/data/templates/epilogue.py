"""Level-2 epilogue chains: a GEMM or a convolution kept in PyTorch, then a random chain of cheap ops.

KernelBench's Level 2 is mostly a heavy op (nn.Linear, a matmul with a weight parameter, Conv1d/2d/3d,
ConvTranspose2d/3d) followed by a few cheap ops. Every example draws the heavy op (small sizes, stride
and padding sometimes) and a chain of 1-6 ops: constants (scale, add, subtract, divide, min, max,
clamp), learned per-channel (per-feature) parameters, activations, and the residual add of the heavy
op's output (`original = x.clone().detach(); ...; x = x + original`), each written one of the ways
people write it (`nn.ReLU()` attributes, `torch.relu`, `F.relu`, `x.relu()`; `torch.clamp` or
`F.hardtanh`; constructor constants or literals).

The solution keeps the heavy call in PyTorch, as the fusion policy allows, and applies the whole chain
in ONE flat Triton kernel over its output, in float32: a parameter is read at the element's channel,
`(offset // spatial) % channels` (a GEMM's at its feature, `offset % features`), offsets are 64-bit,
and the result is stored in the output's dtype. `epilogue_reduce.py` ends a chain with a reduction.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from .base import (Example, RefSpec, SolSpec, Style, TemplateInfo, avoid_clashes, comment, grid_1d, randn,
                   render_reference, render_solution, widen)
from .ctor_defaults import trailing_defaults
from .helper_args import wrap_launch

GEMM_SIZES = [("batch_size", "in_features", "out_features"), ("batch", "input_size", "hidden_size"),
              ("N", "in_dim", "out_dim")]
CHANNEL_NAMES = [("batch_size", "in_channels", "out_channels"), ("N", "C_in", "C_out"), ("batch", "in_ch", "out_ch")]
SPATIAL_NAMES = {1: [("length",), ("L",), ("seq_len",)], 2: [("height", "width"), ("H", "W"), ("h", "w")],
                 3: [("depth", "height", "width"), ("D", "H", "W"), ("d", "h", "w")]}
CONV_KINDS = {"conv1d": (1, False), "conv2d": (2, False), "conv3d": (3, False), "convt2d": (2, True),
              "convt3d": (3, True)}
X_NAMES = ("x", "x", "inp", "input_tensor")
TANH = "2.0 * tl.sigmoid(2.0 * {0}) - 1.0"


class Source:
    """A module-level constant written as an expression of other constants (`bias_shape = (out_channels, 1, 1)`),
    so a resized `out_channels` resizes the shape with it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- the heavy op


@dataclass
class Heavy:
    kind: str  # linear | matmul | conv1d | conv2d | conv3d | convt2d | convt3d
    desc: str
    constants: list[tuple[str, object]]
    init_params: list[tuple[str, str]]
    init_inputs: list[str]
    init_lines: list[str]
    input_shape: list[str]
    ref_line: str  # the reference's `x = heavy(x)`
    sol_line: str  # the solution's `y = heavy(x)` (the bias left out when the kernel adds it)
    kernel_bias: str | None  # the heavy op's own bias, moved into the kernel (solution expression)
    per_feature: bool  # a GEMM: parameters index the last dimension
    pshape: str  # a per-channel parameter's shape: "out_channels, 1, 1"
    dims: dict

    @property
    def is_gemm(self) -> bool:
        return self.kind in ("linear", "matmul")


def draw_gemm(rng: random.Random, style: Style, x: str, matmul: bool, allow_3d: bool = True) -> Heavy:
    b, i, o = style.pick_name(GEMM_SIZES)
    dims = {b: rng.choice((4, 8, 16, 32))}
    shape = [b, i]
    if matmul and allow_3d and rng.random() < 0.3:
        s = style.pick(("seq_len", "seq_len", "num_tokens"), salt=4)
        dims[s] = rng.choice((3, 4, 6))
        shape = [b, s, i]
    dims |= {i: rng.choice((16, 24, 32, 48, 64)), o: rng.choice((16, 20, 32, 48, 64))}
    if not matmul:
        attr = style.pick(("gemm", "linear", "fc", "gemm"), salt=2)
        has_bias = rng.random() < 0.85
        init = f"self.{attr} = nn.Linear({i}, {o})" if has_bias else f"self.{attr} = nn.Linear({i}, {o}, bias=False)"
        ref_line = f"{x} = self.{attr}({x})"
        kernel_bias = f"self.{attr}.bias" if has_bias and rng.random() < 0.35 else None
        sol_line = f"y = F.linear({x}, self.{attr}.weight)" if kernel_bias else f"y = self.{attr}({x})"
        desc = "a linear layer"
    else:
        attr = style.pick(("weight", "W_proj", "weight_matrix"), salt=2)
        scale = rng.choice(("", "", " * 0.1", " * 0.05"))
        transposed = rng.random() < 0.4
        init = (f"self.{attr} = nn.Parameter(torch.randn({o}, {i}){scale})" if transposed else
                f"self.{attr} = nn.Parameter(torch.randn({i}, {o}){scale})")
        w = (f"self.{attr}.t()" if rng.random() < 0.5 else f"self.{attr}.T") if transposed else f"self.{attr}"
        calls = [f"torch.matmul({x}, {w})", f"{x} @ {w}"] + ([f"torch.mm({x}, {w})"] if len(shape) == 2 else [])
        call = rng.choice(calls)
        ref_line, sol_line, kernel_bias = f"{x} = {call}", f"y = {call}", None
        desc = "a matmul with a weight parameter"
    return Heavy("matmul" if matmul else "linear", desc, list(dims.items()), [(i, "int"), (o, "int")], [i, o],
                 [init], shape, ref_line, sol_line, kernel_bias, True, o, dims)


def draw_conv(rng: random.Random, style: Style, x: str, kind: str) -> Heavy:
    nd, transposed = CONV_KINDS[kind]
    bn, cin, cout = style.pick_name(CHANNEL_NAMES)
    spatial = style.pick_name(SPATIAL_NAMES[nd], salt=5)
    k = rng.choice((3, 3, 2, 4) if transposed else (3, 3, 5, 1) if nd < 3 else (3, 3, 2))
    if nd == 1:
        sizes = [rng.choice((16, 24, 32, 40))]
    elif nd == 2:
        sizes = [rng.choice((6, 8, 10) if transposed else (8, 10, 12, 16)) for _ in range(2)]
    else:
        sizes = [rng.choice((4, 5, 6) if transposed else (6, 8, 10)) for _ in range(3)]
    dims = {bn: rng.choice((2, 4) if nd < 3 else (2,)), cin: rng.choice((3, 4, 6, 8)),
            cout: rng.choice((4, 6, 8, 12, 16) if nd < 3 else (4, 6, 8))}
    dims |= dict(zip(spatial, sizes))
    constants: list[tuple[str, object]] = [(bn, dims[bn]), (cin, dims[cin]), (cout, dims[cout])]
    constants += list(zip(spatial, sizes)) + [("kernel_size", k)]
    init_params = [(cin, "int"), (cout, "int"), ("kernel_size", "int")]
    init_inputs = [cin, cout, "kernel_size"]
    stride = rng.choice((1, 1, 2))
    padding = rng.choice((0, 0, 1)) if k > 1 else 0
    out_pad = 1 if transposed and stride == 2 and rng.random() < 0.3 else 0
    kwargs = []
    # KernelBench passes stride and padding (and a transposed one's output_padding) to the constructor even at
    # their defaults ("kb"): a solution must take every one of them, so the corpus shows long constructors too
    mode = rng.choice(("kb", "kb", "changed", "literal"))
    for name, value, default in (("stride", stride, 1), ("padding", padding, 0), ("output_padding", out_pad, 0)):
        if name == "output_padding" and not transposed or value == default and mode != "kb":
            continue
        if mode != "literal":
            constants.append((name, value))
            init_params.append((name, "int"))
            init_inputs.append(name)
            kwargs.append(f"{name}={name}")
        else:
            kwargs.append(f"{name}={value}")
    has_bias = rng.random() < 0.9
    if not has_bias:
        kwargs.append("bias=False")
    cls = f"nn.ConvTranspose{nd}d" if transposed else f"nn.Conv{nd}d"
    attr = style.pick(("conv_transpose", "conv_t", "deconv") if transposed else ("conv", "conv", f"conv{nd}d"), salt=2)
    init = f"self.{attr} = {cls}({', '.join([cin, cout, 'kernel_size', *kwargs])})"
    kernel_bias = f"self.{attr}.bias" if has_bias and rng.random() < 0.35 else None
    if kernel_bias and transposed:
        sol_line = (f"y = F.conv_transpose{nd}d({x}, self.{attr}.weight, None, self.{attr}.stride, self.{attr}.padding, "
                    f"self.{attr}.output_padding, self.{attr}.groups, self.{attr}.dilation)")
    elif kernel_bias:
        sol_line = (f"y = F.conv{nd}d({x}, self.{attr}.weight, None, self.{attr}.stride, self.{attr}.padding, "
                    f"self.{attr}.dilation, self.{attr}.groups)")
    else:
        sol_line = f"y = self.{attr}({x})"
    desc = f"a {nd}D {'transposed ' if transposed else ''}convolution"
    return Heavy(kind, desc, constants, init_params, init_inputs, [init], [bn, cin, *spatial], f"{x} = self.{attr}({x})",
                 sol_line, kernel_bias, False, ", ".join([cout] + ["1"] * nd), dims)


def draw_heavy(rng: random.Random, style: Style, x: str, kind: str, allow_3d: bool = True) -> Heavy:
    if kind in ("linear", "matmul"):
        return draw_gemm(rng, style, x, kind == "matmul", allow_3d)
    return draw_conv(rng, style, x, kind)


# --------------------------------------------------------------------------- the chain


@dataclass
class Build:
    """One example's chain as it is drawn: reference lines, kernel lines and what they need."""

    rng: random.Random
    v: str  # the reference's tensor variable
    pshape: str
    taken: set[str]
    constants: list[tuple[str, object]] = field(default_factory=list)
    init_params: list[tuple[str, str]] = field(default_factory=list)
    init_inputs: list[str] = field(default_factory=list)
    init_lines: list[str] = field(default_factory=list)  # shared with the solution (same state dict)
    ref_init: list[str] = field(default_factory=list)  # the reference's own: activation modules
    fwd: list[str] = field(default_factory=list)  # the reference's lines after the heavy op
    body: list[str] = field(default_factory=list)  # kernel lines taking the fp32 `y` through the chain
    loads: list[str] = field(default_factory=list)  # per-channel parameters: kernel local = pointer name + "_ptr"
    vectors: list[str] = field(default_factory=list)  # their attributes
    scalars: list[str] = field(default_factory=list)  # constructor constants passed to the kernel
    ops: list[str] = field(default_factory=list)
    residual: str | None = None  # the reference's saved copy of the heavy op's output
    n_tmp: int = 0

    def fresh(self, options: tuple[str, ...]) -> str:
        for name in options:
            if name not in self.taken:
                self.taken.add(name)
                return name
        n = 2
        while f"{options[0]}{n}" in self.taken:
            n += 1
        self.taken.add(f"{options[0]}{n}")
        return f"{options[0]}{n}"

    def tmp(self) -> str:
        self.n_tmp += 1
        return f"t{self.n_tmp}"

    def const(self, names: tuple[str, ...], value: float) -> tuple[str, str]:
        """A constant: a constructor argument (reference `self.name`, kernel argument `name`) or a literal."""
        if self.rng.random() < 0.7:  # KernelBench's way, mostly: a constructor argument
            name = self.fresh(names)
            self.constants.append((name, value))
            self.init_params.append((name, "float"))
            self.init_inputs.append(name)
            self.init_lines.append(f"self.{name} = {name}")
            self.scalars.append(name)
            return f"self.{name}", name
        return repr(float(value)), repr(float(value))

    def param(self, names: tuple[str, ...]) -> tuple[str, str]:
        """A learned per-channel (per-feature) parameter: (reference expression, kernel local)."""
        attr = self.fresh(names)
        scale = self.rng.choice(("", "", " * 0.1", " * 0.5"))
        if self.rng.random() < 0.6:  # KernelBench's way: the shape a constructor argument
            shape = f"{attr}_shape"
            self.taken.add(shape)
            self.constants.append((shape, Source(f"({self.pshape},)" if "," not in self.pshape else f"({self.pshape})")))
            self.init_params.append((shape, "tuple"))
            self.init_inputs.append(shape)
            self.init_lines.append(f"self.{attr} = nn.Parameter(torch.randn({shape}){scale})")
        else:
            self.init_lines.append(f"self.{attr} = nn.Parameter(torch.randn({self.pshape}){scale})")
        self.loads.append(attr)
        self.vectors.append(attr)
        return f"self.{attr}", attr

    def module(self, names: tuple[str, ...], ctor: str) -> str:
        attr = self.fresh(names)
        self.ref_init.append(f"self.{attr} = {ctor}")
        return f"self.{attr}"

    def emit(self, ref: str | list[str], *kernel: str) -> None:
        """The reference's line(s) of one op and the kernel lines that compute it. The kernel carries each
        reference line as a comment just above its translation: the chain is then written line by line,
        the PyTorch line next to the Triton one. A 135M model copies a line well and recalls the order of a
        chain 1,000 tokens back badly (held-out KernelBench Level 2: right structure, wrong ops)."""
        refs = [ln.format(v=self.v) for ln in ([ref] if isinstance(ref, str) else ref)]
        self.fwd += refs
        self.body += [f"# {ln}" for ln in refs] + list(kernel)

    def pick(self, options: list):
        return self.rng.choice(options)


def trace(ref_lines: list[str]) -> list[str]:
    """A reduction's or a norm's reference line(s) as comments, placed just above the lines that start
    computing it (the end of a kernel's tile: the first pass then carries them above its first statistic),
    so `# x = self.group_norm(x)` is followed by what computes a group norm, never by an elementwise line."""
    return [f"# {ln}" for ln in ref_lines]


def untraced(lines: list[str]) -> list[str]:
    """`lines` without their trace comments: a later pass over the tiles recomputes the chain, and its
    trace is read once, in the first."""
    return [ln for ln in lines if not ln.lstrip().startswith("#")]


def _arith(kind: str):
    names, values, sym, fn = {
        "scale": (("scaling_factor", "scale_factor", "multiplier"), (0.5, 2.0, 1.5, 0.1, 3.0), "*", "mul"),
        "add": (("add_value", "bias_value", "shift"), (0.5, 1.0, 0.1, 2.0, 0.25), "+", "add"),
        "sub": (("subtract_value", "sub_value", "offset_value"), (0.5, 0.2, 1.0, 0.25), "-", "sub"),
        "div": (("divisor", "divide_by", "scale_divisor"), (2.0, 3.0, 1.5, 4.0, 0.5), "/", "div"),
    }[kind]

    def op(b: Build) -> None:
        r, k = b.const(names, widen(b.rng.choice(values), b.rng))
        b.emit(b.pick([f"{{v}} = {{v}} {sym} {r}", f"{{v}} = torch.{fn}({{v}}, {r})", f"{{v}} {sym}= {r}"]),
               f"y = y {sym} {k}")
    return op


def _param_op(kind: str):
    names, sym, fn = {"bias": (("bias", "add_bias", "channel_bias", "extra_bias"), "+", "add"),
                      "mul_param": (("scale", "multiplier", "gamma", "channel_scale"), "*", "mul"),
                      "sub_param": (("subtract", "sub_bias", "shift_param"), "-", "sub")}[kind]

    def op(b: Build) -> None:
        r, k = b.param(names)
        b.emit(b.pick([f"{{v}} = {{v}} {sym} {r}", f"{{v}} = torch.{fn}({{v}}, {r})"]), f"y = y {sym} {k}")
    return op


def _clamp(b: Build) -> None:
    lo, hi = b.pick([(-1.0, 1.0), (0.0, 1.0), (-0.5, 0.5), (-2.0, 2.0), (0.0, 6.0), (-1.0, 0.5)])
    lr, lk = b.const(("clamp_min", "min_value", "hardtanh_min"), widen(lo, b.rng))
    hr, hk = b.const(("clamp_max", "max_value", "hardtanh_max"), widen(hi, b.rng))
    form = b.rng.randrange(5)
    if form == 4:
        m = b.module(("hardtanh", "clamp_act"), f"nn.Hardtanh(min_val={lr}, max_val={hr})")
        ref = f"{{v}} = {m}({{v}})"
    else:
        ref = [f"{{v}} = torch.clamp({{v}}, min={lr}, max={hr})", f"{{v}} = torch.clamp({{v}}, {lr}, {hr})",
               f"{{v}} = {{v}}.clamp({lr}, {hr})", f"{{v}} = F.hardtanh({{v}}, min_val={lr}, max_val={hr})"][form]
    b.emit(ref, f"y = tl.minimum(tl.maximum(y, {lk}), {hk})")


def _bound(upper: bool):
    names = ("max_value", "clamp_max", "upper_bound", "constant_value") if upper else \
        ("min_value", "clamp_min", "lower_bound", "constant_value")
    values = (0.5, 1.0, 0.0, 2.0, 0.25) if upper else (0.0, -0.5, -1.0, 0.5, 0.1)
    kw, short, fn = ("max", "clamp_max", "min") if upper else ("min", "clamp_min", "max")

    def op(b: Build) -> None:
        r, k = b.const(names, widen(b.rng.choice(values), b.rng))
        b.emit(b.pick([f"{{v}} = torch.clamp({{v}}, {kw}={r})", f"{{v}} = {{v}}.clamp({kw}={r})",
                       f"{{v}} = torch.{short}({{v}}, {r})", f"{{v}} = torch.{fn}({{v}}, torch.tensor({r}))",
                       f"{{v}} = torch.{fn}imum({{v}}, torch.tensor({r}, device={{v}}.device))"]),
               f"y = tl.{fn}imum(y, {k})")
    return op


def _act(forms: list[str], modules: tuple[tuple[str, ...], str] | None, kernels: list):
    """An activation: functional forms ("{v}" the tensor), an optional nn module, kernel variants
    (lists of lines over `y`; "{t}" a fresh temporary)."""

    def op(b: Build) -> None:
        n_forms = len(forms) + (1 if modules else 0)
        form = b.rng.randrange(n_forms)
        if form < len(forms):
            ref = f"{{v}} = {forms[form]}"
        else:
            ref = f"{{v}} = {b.module(modules[0], modules[1])}({{v}})"
        t = b.tmp()
        b.emit(ref, *[ln.format(t=t) for ln in b.pick(kernels)])
    return op


def _leaky_relu(b: Build) -> None:
    form = b.rng.randrange(4)
    if form == 0:  # the default slope
        b.emit("{v} = F.leaky_relu({v})", "y = tl.where(y > 0, y, y * 0.01)")
        return
    r, k = b.const(("negative_slope", "slope", "leaky_slope"), b.rng.choice((0.01, 0.1, 0.2, 0.05)))
    ref = [f"{{v}} = F.leaky_relu({{v}}, negative_slope={r})", f"{{v}} = torch.nn.functional.leaky_relu({{v}}, {r})",
           f"{{v}} = {b.module(('leaky_relu', 'act'), f'nn.LeakyReLU(negative_slope={r})')}({{v}})" if form == 3 else ""]
    b.emit(ref[form - 1], f"y = tl.where(y > 0, y, y * {k})")


def _elu(b: Build) -> None:
    if b.rng.random() < 0.4:
        b.emit(b.pick(["{v} = F.elu({v})", "{v} = torch.nn.functional.elu({v})"]),
               "y = tl.where(y > 0, y, tl.exp(tl.minimum(y, 0.0)) - 1.0)")
        return
    r, k = b.const(("alpha", "elu_alpha"), b.rng.choice((0.5, 1.5, 2.0, 1.0)))
    if b.rng.random() < 0.5:
        ref = f"{{v}} = F.elu({{v}}, alpha={r})"
    else:
        ref = f"{{v}} = {b.module(('elu', 'act'), f'nn.ELU(alpha={r})')}({{v}})"
    b.emit(ref, f"y = tl.where(y > 0, y, {k} * (tl.exp(tl.minimum(y, 0.0)) - 1.0))")


SOFTPLUS = "tl.where({0} > 20.0, {0}, tl.log(1.0 + tl.exp(tl.minimum({0}, 20.0))))"
STABLE_TANH = ["{t} = tl.exp(-2.0 * tl.abs(y))", "{t} = (1.0 - {t}) / (1.0 + {t})", "y = tl.where(y >= 0, {t}, -{t})"]

OPS = {
    "scale": _arith("scale"), "add": _arith("add"), "sub": _arith("sub"), "div": _arith("div"),
    "bias": _param_op("bias"), "mul_param": _param_op("mul_param"), "sub_param": _param_op("sub_param"),
    "clamp": _clamp, "min": _bound(True), "max": _bound(False),
    "relu": _act(["torch.relu({v})", "F.relu({v})", "{v}.relu()"], (("relu", "act"), "nn.ReLU()"),
                 [["y = tl.maximum(y, 0.0)"], ["y = tl.where(y > 0, y, 0.0)"]]),
    "relu6": _act(["F.relu6({v})", "torch.clamp({v}, 0.0, 6.0)"], (("relu6", "act"), "nn.ReLU6()"),
                  [["y = tl.minimum(tl.maximum(y, 0.0), 6.0)"]]),
    "leaky_relu": _leaky_relu,
    "gelu": _act(["F.gelu({v})", "torch.nn.functional.gelu({v})"], (("gelu", "act"), "nn.GELU()"),
                 [["y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))"]]),
    "gelu_tanh": _act(['F.gelu({v}, approximate="tanh")',
                       "0.5 * {v} * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * ({v} + 0.044715 * torch.pow({v}, 3.0))))"],
                      (("gelu", "act"), 'nn.GELU(approximate="tanh")'),
                      [["{t} = 0.7978845608028654 * (y + 0.044715 * y * y * y)",
                        "y = 0.5 * y * (1.0 + " + TANH.format("{t}") + ")"]]),
    "sigmoid": _act(["torch.sigmoid({v})", "{v}.sigmoid()"], (("sigmoid", "act"), "nn.Sigmoid()"),
                    [["y = tl.sigmoid(y)"], ["y = 1.0 / (1.0 + tl.exp(-y))"]]),
    "tanh": _act(["torch.tanh({v})", "{v}.tanh()"], (("tanh", "act"), "nn.Tanh()"), [["y = " + TANH.format("y")], STABLE_TANH]),
    "swish": _act(["{v} * torch.sigmoid({v})", "torch.sigmoid({v}) * {v}", "F.silu({v})"], (("silu", "swish"), "nn.SiLU()"),
                  [["y = y * tl.sigmoid(y)"], ["y = y / (1.0 + tl.exp(-y))"]]),
    "mish": _act(["F.mish({v})", "{v} * torch.tanh(F.softplus({v}))"], (("mish", "act"), "nn.Mish()"),
                 [["{t} = " + SOFTPLUS.format("y"), "y = y * (" + TANH.format("{t}") + ")"]]),
    "hardswish": _act(["F.hardswish({v})", "{v} * F.relu6({v} + 3) / 6"], (("hardswish", "act"), "nn.Hardswish()"),
                      [["y = y * tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0"]]),
    "hardsigmoid": _act(["F.hardsigmoid({v})"], (("hardsigmoid", "act"), "nn.Hardsigmoid()"),
                        [["y = tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0"]]),
    "softplus": _act(["F.softplus({v})", "torch.nn.functional.softplus({v})"], (("softplus", "act"), "nn.Softplus()"),
                     [["y = " + SOFTPLUS.format("y")]]),
    "elu": _elu,
    "selu": _act(["torch.selu({v})", "F.selu({v})"], (("selu", "act"), "nn.SELU()"),
                 [["y = 1.0507009873554805 * tl.where(y > 0, y, 1.6732632423543772 * (tl.exp(tl.minimum(y, 0.0)) - 1.0))"]]),
}
# draw weights: activations and constants as often as KernelBench's chains use them
WEIGHTS = {"scale": 5, "add": 3, "sub": 3, "div": 3, "bias": 4, "mul_param": 3, "sub_param": 1, "clamp": 3,
           "min": 2, "max": 2, "relu": 4, "relu6": 1, "leaky_relu": 3, "gelu": 3, "gelu_tanh": 1, "sigmoid": 3,
           "tanh": 3, "swish": 3, "mish": 2, "hardswish": 2, "hardsigmoid": 1, "softplus": 1, "elu": 1, "selu": 1}


OP_WORDS = {"scale": "a constant scale", "add": "a constant added", "sub": "a constant subtracted",
            "div": "a division by a constant", "bias": "a learned {per} bias added",
            "mul_param": "a learned {per} scale", "sub_param": "a learned {per} bias subtracted", "clamp": "a clamp",
            "min": "a minimum with a constant", "max": "a maximum with a constant", "relu": "ReLU", "relu6": "ReLU6",
            "leaky_relu": "LeakyReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh approximation)", "sigmoid": "sigmoid",
            "tanh": "tanh", "swish": "Swish", "mish": "Mish", "hardswish": "HardSwish", "hardsigmoid": "HardSigmoid",
            "softplus": "Softplus", "elu": "ELU", "selu": "SELU", "residual_add": "the {heavy} output added back"}


def chain_words(ops: list[str], heavy: Heavy) -> str:
    """The chain in words, for the reference's docstring."""
    per = "per-feature" if heavy.per_feature else "per-channel"
    what = "GEMM" if heavy.is_gemm else "convolution"
    return ", ".join(OP_WORDS[o].format(per=per, heavy=what) for o in ops)


def draw_chain(b: Build, n_ops: int, residual_ok: bool = True) -> None:
    """Draw `n_ops` ops into `b`: no op twice in a row, sometimes the residual add of the heavy output."""
    names = list(WEIGHTS)
    chosen: list[str] = []
    for _ in range(n_ops):
        while True:
            op = b.rng.choices(names, weights=[WEIGHTS[n] for n in names])[0]
            if not chosen or op != chosen[-1]:
                break
        chosen.append(op)
    at = b.rng.randrange(1, n_ops + 1) if residual_ok and n_ops >= 2 and b.rng.random() < 0.25 else None
    for i, op in enumerate(chosen):
        if i == at:
            _residual_add(b)
        OPS[op](b)
        b.ops.append(op)
    if at == n_ops:
        _residual_add(b)


def _residual_add(b: Build) -> None:
    b.residual = b.fresh(("original_x", "original", "residual", "x_orig", "identity"))
    b.emit(b.pick([f"{{v}} = {{v}} + {b.residual}", f"{{v}} = torch.add({{v}}, {b.residual})",
                   f"{{v}} = {b.residual} + {{v}}"]), "y = y + res")
    b.ops.append("residual_add")


def start_build(rng: random.Random, style: Style, heavy: Heavy, x: str) -> Build:
    taken = {x, "y", "out", "res", "self", "c", "ch", "col", "feat", "math", "F", "nn", "torch", "triton", "tl",
             "spatial", "channels", "features", "n_cols", "inner", "R", "start", "row", "cols", "acc",
             *(n for n, _ in heavy.constants), *heavy.init_inputs,
             *(ln.split("=")[0].strip().removeprefix("self.") for ln in heavy.init_lines)}
    return Build(rng=rng, v=x, pshape=heavy.pshape, taken=taken)


def reference_spec(heavy: Heavy, b: Build, doc: str, tail: list[str], forward_doc: str) -> RefSpec:
    fwd = [heavy.ref_line]
    if b.residual:
        fwd.append(b.pick([f"{b.residual} = {b.v}.clone().detach()", f"{b.residual} = {b.v}.clone()"]))
    fwd += b.fwd + tail
    init_lines = heavy.init_lines + b.init_lines + b.ref_init
    imports = ["import torch.nn.functional as F"] if any(re.search(r"\bF\.", ln) for ln in fwd + init_lines) else []
    if any("math." in ln for ln in fwd):
        imports.insert(0, "import math")
    params, consts = heavy.init_params + b.init_params, heavy.constants + b.constants
    return RefSpec(doc=doc, init_params=params, init_lines=init_lines, forward_args=[b.v], forward_lines=fwd,
                   constants=consts, inputs=[(b.v, randn(heavy.input_shape, "float32"))],
                   init_inputs=heavy.init_inputs + b.init_inputs, forward_doc=forward_doc, imports=imports,
                   init_defaults=trailing_defaults(b.rng, params, b.init_params, dict(consts)))


def kernel_inputs(heavy: Heavy, b: Build, style: Style) -> tuple[list[str], list[str], list[str]]:
    """(kernel pointer arguments, helper parameter names, forward expressions) of the tensors the kernel reads."""
    ptrs, params, exprs = [], [], []
    if heavy.kernel_bias:
        ptrs.append(style.ptr("heavy_bias"))
        params.append("heavy_bias")
        exprs.append(heavy.kernel_bias)
    for attr in b.vectors:
        ptrs.append(style.ptr(attr))
        params.append(attr)
        exprs.append(f"self.{attr}")
    return ptrs, params, exprs


def load_lines(heavy: Heavy, b: Build, style: Style, index: str, mask: str | None) -> list[str]:
    """The per-channel loads (and the heavy op's bias added to `y`), at `index` under `mask`."""
    how = f", mask={mask}, other=0.0" if mask else ""
    out = []
    if heavy.kernel_bias:
        out.append(f"y = y + tl.load({style.ptr('heavy_bias')} + {index}{how}).to(tl.float32)")
    out += [f"{attr} = tl.load({style.ptr(attr)} + {index}{how}).to(tl.float32)" for attr in b.loads]
    if b.residual:
        out.append("res = y")
    return out


def store_value(style: Style, value: str, out_p: str) -> str:
    """What the kernel stores: `value` cast to the output's element type (half the styles, by
    `variant`), or as it is (tl.store casts it)."""
    return f"{value}.to({out_p}.dtype.element_ty)" if style.variant % 2 else value


def finish_epilogue(family: str, heavy: Heavy, b: Build, style: Style, ref: RefSpec, kname: str, kernel: str,
                    launch: list[str], params: list[str], exprs: list[str], fused: str, description: str,
                    dtype: str, dims: dict) -> Example:
    """The example of a fused epilogue: the heavy call kept in PyTorch, then the launch of `kernel`
    (inline or in a helper), with a note that `fused` ("the whole chain after it is") is one kernel."""
    note = ("The GEMM" if heavy.is_gemm else "The convolution") + f" stays in PyTorch; {fused} one Triton kernel."
    helpers, forward = wrap_launch(style, family, kname, heavy.sol_line, launch, params + b.scalars,
                                   exprs + [f"self.{s}" for s in b.scalars], note)
    # __init__ is the reference's, activation modules included (unused, harmless): copied whole, not pruned
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None,
                  imports=["import torch.nn.functional as F"] if "F." in heavy.sol_line else [])
    return Example(family, render_reference(ref, style), render_solution(ref, sol, style), description, dtype, dims,
                   style)


# --------------------------------------------------------------------------- the flat epilogue kernel


def render_chain(family: str, kinds: tuple[str, ...], rng: random.Random, dtype: str, style: Style) -> Example:
    x = style.pick_name(X_NAMES, salt=1)
    heavy = draw_heavy(rng, style, x, rng.choice(kinds))
    b = start_build(rng, style, heavy, x)
    draw_chain(b, rng.choice((1, 2, 2, 3, 3, 4, 4, 5, 6)))
    style = avoid_clashes(style, sorted(b.taken | {"y", "res"}))
    chain = " -> ".join(b.ops)
    doc = f"{heavy.desc[0].upper()}{heavy.desc[1:]}, then {chain_words(b.ops, heavy)}."
    ref = reference_spec(heavy, b, doc, [f"return {x}"], "the output of the chain, shaped like the heavy op's output.")

    kname = style.kernel(f"{family}_epilogue")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    index = style.pick(("col", "feat"), salt=6) if heavy.per_feature else style.pick(("c", "ch"), salt=6)
    needs_index = bool(ptrs)
    size_args = ([] if not needs_index else ["n_cols"] if heavy.per_feature else ["spatial", "channels"])
    y_p, out_p, o, m, n, blk = style.ptr("y"), style.ptr("out"), style.offs, style.mask, style.numel, style.block
    args = [y_p, out_p, *ptrs, n, *size_args, *b.scalars]
    body = [f"{m} = {o} < {n}"]
    if needs_index:
        body.append(f"{index} = {o} % n_cols" if heavy.per_feature else f"{index} = ({o} // spatial) % channels")
    body.append(f"y = tl.load({y_p} + {o}, mask={m}, other=0.0).to(tl.float32)")
    body += load_lines(heavy, b, style, index, m) + b.body
    body.append(f"tl.store({out_p} + {o}, {store_value(style, 'y', out_p)}, mask={m})")
    if style.loop:
        lines = [f"{style.pid} = tl.program_id(axis=0)", "num_programs = tl.num_programs(axis=0)",
                 f"for start in range({style.pid} * {blk}, {n}, num_programs * {blk}):",
                 f"    {o} = start + tl.arange(0, {blk}).to(tl.int64)"] + [f"    {ln}" for ln in body]
        what = "each program walks every num_programs-th block; 64-bit offsets"
    else:
        lines = [f"{style.pid} = tl.program_id(axis=0)",
                 f"{o} = {style.pid}.to(tl.int64) * {blk} + tl.arange(0, {blk})"] + body
        what = "one block of the heavy op's output per program; 64-bit offsets"
    where = ("a feature is offset % n_cols" if heavy.per_feature else
             "a channel is (offset // spatial) % channels") if needs_index else "no per-channel data"
    kernel = (f"@triton.jit\ndef {kname}({', '.join(args)}, {blk}: tl.constexpr):\n"
              + comment(style, f"{what}; {where}; the chain in float32: {chain}")
              + "\n".join(f"    {ln}" for ln in lines) + "\n")

    in_place = rng.random() < 0.2
    launch = ["y = y.contiguous()", "out = y" if in_place else "out = torch.empty_like(y)", f"{n} = y.numel()"]
    if needs_index and heavy.per_feature:
        launch.append("n_cols = y.shape[-1]")
    elif needs_index:
        launch += ["channels = y.shape[1]", rng.choice(["spatial = y.numel() // (y.shape[0] * channels)",
                                                        "spatial = y[0, 0].numel()"])]
    launch.append(f"grid = {grid_1d(style, n, loop=style.loop)}")
    launch.append(f"{kname}[grid]({', '.join(['y', 'out', *params, n, *size_args, *b.scalars])}, "
                  f"{blk}={style.block_size})")
    launch.append("return out")
    return finish_epilogue(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                           "the whole chain after it is", f"fused epilogue: {heavy.kind} -> {chain}", dtype,
                           heavy.dims | {"chain": chain})


FAMILY_KINDS = {
    "gemm_chain": ("linear",),
    "matmul_chain": ("matmul",),
    "conv_chain": ("conv1d", "conv2d", "conv2d", "conv3d"),
    "convtranspose_chain": ("convt2d", "convt2d", "convt3d"),
}


def templates() -> list[TemplateInfo]:
    # learned weights are fp32 and the reference runs as written: these tasks stay fp32
    return [TemplateInfo(fam, lambda rng, d, s, kinds=kinds, fam=fam: render_chain(fam, kinds, rng, d, s), ("float32",))
            for fam, kinds in FAMILY_KINDS.items()]
