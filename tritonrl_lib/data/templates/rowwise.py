"""Row-wise templates: one program per row (Triton tutorial 02's fused-softmax shape).

The operated dimension is moved last and made contiguous; each program walks its row in tiles of at
most a CAP the example draws (rowwise_loop.py: statistics in fp32 over the tiles, a carry for scans,
64-bit row offsets past 2**31 elements), or, for a minority whose shown row holds at most 4096 elements,
loads the row whole (BLOCK is the next power of two of its length). Stored as a row or as one value per
row. Families: softmax and log-softmax, reductions over a dimension, cumulative ops, layer / RMS / L2 /
instance normalisation, and the Level-2 chains built on them. Published-scale prompts show KernelBench-
like rows (up to 393,216 elements). Reductions over any dim and SwiGLU are in rowwise_reduce.py.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable

from . import rowwise_loop as loop
from . import scale
from .base import (DEFAULT_STYLE, Example, RefSpec, SolSpec, Style, TemplateInfo, avoid_clashes, comment, make_example,
                   randn)
from .rowwise_reduce import SIZES_2D, SIZES_3D, SIZES_4D, X_NAMES, Ctx, _input, render_reduce, render_swiglu

Form = Callable[[Ctx], "list[str] | tuple[list[str], list[str]]"]  # forward lines, or (reference-only init, forward)


@dataclass
class RowFamily:
    family: str
    doc: str
    forms: list[Form]  # reference forward lines (with __init__ lines of the reference's own, if a tuple)
    compute: list[Callable[[Ctx], list[str]]]  # kernel lines from the loaded row `x` to `out`
    output: str = "row"  # row | reduce | reduce_keepdim
    other: str = "0.0"  # masked-load fill value for the row
    shared_init: Callable[[Ctx], list[str]] = lambda c: []  # __init__ lines of both modules
    init_params: list[tuple[str, str]] = field(default_factory=list)  # constructor (name, type)
    init_inputs: Callable[[Ctx], list[str]] = lambda c: []
    scalars: list[tuple[str, tuple]] = field(default_factory=list)  # constants passed as floats
    weights: Callable[[Ctx], list[tuple[str, str]]] = lambda c: []  # (kernel arg, ModelNew expr) per column
    kernel_scalars: Callable[[Ctx], list[tuple[str, str]]] = lambda c: []  # (kernel arg, ModelNew expr)
    dim_param: bool = False  # the operated dim is a constructor argument
    rank: tuple[int, ...] = (2, 3)
    max_cols: int = 256
    input_kind: str = "randn"  # randn | near_one
    residual: bool = False
    helpers: list[str] = field(default_factory=list)  # extra @triton.jit helpers (combine functions)
    out_dtype: str = ""  # "" = the input's; else a torch dtype expression
    imports_f: bool = False
    level: int = 1
    cols_4d: bool = False  # operate over (H, W) of a 4D input (instance norm)
    dtypes: tuple[str, ...] = ("float32", "float16")
    description: str = ""


def _mean_var(c: Ctx) -> list[str]:
    return [f"mean = tl.sum({c.x}, axis=0) / {c.n_cols}",
            f"diff = tl.where({c.mask}, {c.x} - mean, 0.0)",
            f"var = tl.sum(diff * diff, axis=0) / {c.n_cols}",
            "rstd = 1.0 / tl.sqrt(var + eps)"]


def _gelu(v: str) -> str:
    return f"0.5 * {v} * (1.0 + tl.erf({v} * 0.7071067811865476))"


SOFTMAX = [
    lambda c: [f"z = {c.x} - tl.max({c.x}, axis=0)", "num = tl.exp(z)", f"{c.out} = num / tl.sum(num, axis=0)"],
    lambda c: [f"row_max = tl.max({c.x}, axis=0)", f"num = tl.exp({c.x} - row_max)", "den = tl.sum(num, axis=0)",
               f"{c.out} = num / den"],
]
LOG_SOFTMAX = [lambda c: [f"z = {c.x} - tl.max({c.x}, axis=0)",
                          f"{c.out} = z - tl.log(tl.sum(tl.exp(z), axis=0))"]]
MUL_COMBINE = """
@triton.jit
def _mul_combine(a, b):
    return a * b
"""


def _ln_init(c: Ctx) -> list[str]:
    if c.style.variant % 2 == 0:
        return [f"self.{c.attr} = nn.LayerNorm({c.sizes[-1]})"]
    return [f"self.weight = nn.Parameter(torch.randn({c.sizes[-1]}) * 0.1 + 1.0)",
            f"self.bias = nn.Parameter(torch.randn({c.sizes[-1]}) * 0.1)", "self.eps = 1e-5"]


def _ln_call(c: Ctx, arg: str) -> str:
    if c.style.variant % 2 == 0:
        return f"self.{c.attr}({arg})"
    return f"F.layer_norm({arg}, ({arg}.shape[-1],), self.weight, self.bias, self.eps)"


def _ln_weights(c: Ctx) -> list[tuple[str, str]]:
    owner = f"self.{c.attr}." if c.style.variant % 2 == 0 else "self."
    return [("w", f"{owner}weight"), ("b", f"{owner}bias")]


def _ln_eps(c: Ctx) -> list[tuple[str, str]]:
    return [("eps", f"self.{c.attr}.eps" if c.style.variant % 2 == 0 else "self.eps")]


def _rms_ref(c: Ctx, arg: str) -> str:
    if c.style.variant % 2 == 0:
        return f"{arg} * torch.rsqrt({arg}.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight"
    return f"{arg} / torch.sqrt(torch.mean({arg} ** 2, dim=-1, keepdim=True) + self.eps) * self.weight"


RMS_INIT = lambda c: [f"self.weight = nn.Parameter(torch.randn({c.sizes[-1]}) * 0.1 + 1.0)", "self.eps = 1e-6"]
RMS_COMPUTE = lambda c: [f"ms = tl.sum({c.x} * {c.x}, axis=0) / {c.n_cols}",
                         f"{c.out} = {c.x} / tl.sqrt(ms + eps) * w"]


def _arg(dim: str) -> str:
    """The constructor argument behind `self.dim` (a module built in __init__ takes the argument)."""
    return dim.removeprefix("self.")


def _reduce_forms(fn: str, method: str | None = None) -> list[Callable[[Ctx], list[str]]]:
    forms = [lambda c: [f"return torch.{fn}({c.x}, dim={c.dim})"]]
    if method:
        forms.append(lambda c: [f"return {c.x}.{method}(dim={c.dim})"])
    return forms


FAMILIES: list[RowFamily] = [
    # ---------------------------------------------------------------- softmax
    RowFamily("softmax", "Applies softmax over one dimension.",
              [lambda c: [f"return torch.softmax({c.x}, dim={c.dim})"],
               lambda c: [f"return F.softmax({c.x}, dim={c.dim})"],
               lambda c: ([f"self.softmax = nn.Softmax(dim={_arg(c.dim)})"], [f"return self.softmax({c.x})"]),
               lambda c: [f"return {c.x}.softmax(dim={c.dim})"]],
              SOFTMAX, other='-float("inf")', dim_param=True, rank=(2,), imports_f=True),
    RowFamily("log_softmax", "Applies log-softmax over one dimension.",
              [lambda c: [f"return torch.log_softmax({c.x}, dim={c.dim})"],
               lambda c: [f"return F.log_softmax({c.x}, dim={c.dim})"],
               lambda c: ([f"self.log_softmax = nn.LogSoftmax(dim={_arg(c.dim)})"], [f"return self.log_softmax({c.x})"]),
               lambda c: [f"return {c.x}.log_softmax({c.dim})"]],
              LOG_SOFTMAX, other='-float("inf")', dim_param=True, rank=(2,), imports_f=True),
    # ---------------------------------------------------------------- reductions
    RowFamily("sum_dim", "Sums over one dimension.", _reduce_forms("sum", "sum"),
              [lambda c: [f"{c.out} = tl.sum({c.x}, axis=0)"]], output="reduce", dim_param=True, rank=(3,)),
    RowFamily("mean_dim", "Averages over one dimension.", _reduce_forms("mean", "mean"),
              [lambda c: [f"{c.out} = tl.sum({c.x}, axis=0) / {c.n_cols}"]], output="reduce", dim_param=True,
              rank=(3,)),
    RowFamily("max_dim", "Takes the maximum over one dimension.",
              [lambda c: [f"return torch.max({c.x}, dim={c.dim})[0]"],
               lambda c: [f"return torch.amax({c.x}, dim={c.dim})"],
               lambda c: [f"return {c.x}.max(dim={c.dim}).values"]],
              [lambda c: [f"{c.out} = tl.max({c.x}, axis=0)"]], output="reduce", other='-float("inf")',
              dim_param=True, rank=(3,)),
    RowFamily("min_dim", "Takes the minimum over one dimension.",
              [lambda c: [f"return torch.min({c.x}, dim={c.dim})[0]"],
               lambda c: [f"return torch.amin({c.x}, dim={c.dim})"]],
              [lambda c: [f"{c.out} = tl.min({c.x}, axis=0)"]], output="reduce", other='float("inf")',
              dim_param=True, rank=(3,)),
    RowFamily("argmax_dim", "Returns the index of the maximum over one dimension.",
              [lambda c: [f"return torch.argmax({c.x}, dim={c.dim})"]],
              [lambda c: [f"{c.out} = tl.argmax({c.x}, axis=0)"]], output="reduce", other='-float("inf")',
              dim_param=True, rank=(3,), out_dtype="torch.int64"),
    RowFamily("argmin_dim", "Returns the index of the minimum over one dimension.",
              [lambda c: [f"return torch.argmin({c.x}, dim={c.dim})"]],
              [lambda c: [f"{c.out} = tl.argmin({c.x}, axis=0)"]], output="reduce", other='float("inf")',
              dim_param=True, rank=(3,), out_dtype="torch.int64"),
    RowFamily("prod_dim", "Multiplies the elements over one dimension.", _reduce_forms("prod", "prod"),
              [lambda c: [f"{c.out} = tl.reduce({c.x}, 0, _mul_combine)"]], output="reduce", other="1.0",
              dim_param=True, rank=(3,), max_cols=32, input_kind="near_one", helpers=[MUL_COMBINE],
              dtypes=("float32",)),
    RowFamily("norm_dim", "Takes the L2 norm over one dimension.",
              [lambda c: [f"return torch.norm({c.x}, p=2, dim={c.dim})"],
               lambda c: [f"return torch.linalg.vector_norm({c.x}, dim={c.dim})"]],
              [lambda c: [f"{c.out} = tl.sqrt(tl.sum({c.x} * {c.x}, axis=0))"]], output="reduce",
              dim_param=True, rank=(3,)),
    # ---------------------------------------------------------------- cumulative
    RowFamily("cumsum", "Computes the cumulative sum along one dimension.",
              [lambda c: [f"return torch.cumsum({c.x}, dim={c.dim})"], lambda c: [f"return {c.x}.cumsum({c.dim})"]],
              [lambda c: [f"{c.out} = tl.cumsum({c.x}, axis=0)"]], dim_param=True, rank=(2,), max_cols=128),
    RowFamily("cumprod", "Computes the cumulative product along one dimension.",
              [lambda c: [f"return torch.cumprod({c.x}, dim={c.dim})"]],
              [lambda c: [f"{c.out} = tl.cumprod({c.x}, axis=0)"]], other="1.0", dim_param=True, rank=(2,),
              max_cols=32, input_kind="near_one", dtypes=("float32",)),
    RowFamily("reverse_cumsum", "Computes the cumulative sum from the end of one dimension.",
              [lambda c: [f"return torch.cumsum({c.x}.flip({c.dim}), dim={c.dim}).flip({c.dim})"]],
              [lambda c: [f"{c.out} = tl.cumsum({c.x}, axis=0)"]], dim_param=True, rank=(2,), max_cols=128),
    RowFamily("exclusive_cumsum", "Computes the exclusive cumulative sum (each element excluded).",
              [lambda c: [f"return torch.cumsum({c.x}, dim={c.dim}) - {c.x}"]],
              [lambda c: [f"{c.out} = tl.cumsum({c.x}, axis=0) - {c.x}"]], dim_param=True, rank=(2,), max_cols=128),
    # ---------------------------------------------------------------- normalisation
    RowFamily("layer_norm", "Applies layer normalisation over the last dimension.",
              [lambda c: [f"return {_ln_call(c, c.x)}"]],
              [lambda c: _mean_var(c) + [f"{c.out} = diff * rstd * w + b"]],
              shared_init=_ln_init, init_params=[("SIZE", "int")], weights=_ln_weights, kernel_scalars=_ln_eps,
              imports_f=True),
    RowFamily("rms_norm", "Applies RMS normalisation over the last dimension with a learned scale.",
              [lambda c: [f"return {_rms_ref(c, c.x)}"]], [RMS_COMPUTE],
              shared_init=RMS_INIT, init_params=[("SIZE", "int")], weights=lambda c: [("w", "self.weight")],
              kernel_scalars=lambda c: [("eps", "self.eps")]),
    RowFamily("l2_normalize", "Divides each row by its L2 norm.",
              [lambda c: [f"return F.normalize({c.x}, p=2, dim=-1)"],
               lambda c: [f"return {c.x} / torch.norm({c.x}, p=2, dim=-1, keepdim=True).clamp_min(1e-12)"]],
              [lambda c: [f"norm = tl.sqrt(tl.sum({c.x} * {c.x}, axis=0))",
                          f"{c.out} = {c.x} / tl.maximum(norm, 1e-12)"]], imports_f=True),
    RowFamily("instance_norm", "Applies instance normalisation (no affine) to a 4D input.",
              [lambda c: [f"return self.{c.attr}({c.x})"]],
              [lambda c: _mean_var(c) + [f"{c.out} = diff * rstd"]],
              shared_init=lambda c: [f"self.{c.attr} = nn.InstanceNorm2d({c.sizes[1]})"],
              init_params=[("CHANNELS", "int")], kernel_scalars=lambda c: [("eps", f"self.{c.attr}.eps")],
              rank=(4,), cols_4d=True),
    # ---------------------------------------------------------------- Level 2: reduction chains
    RowFamily("softmax_scale", "Applies softmax over the last dimension, then multiplies by a constant.",
              [lambda c: [f"{c.x} = torch.softmax({c.x}, dim=-1)", f"return {c.x} * self.scale"],
               lambda c: [f"return F.softmax({c.x}, dim=-1) * self.scale"],
               lambda c: (["self.softmax = nn.Softmax(dim=-1)"], [f"{c.x} = self.softmax({c.x})", f"return {c.x} * self.scale"])],
              [lambda c: [f"z = {c.x} - tl.max({c.x}, axis=0)", "num = tl.exp(z)",
                          f"{c.out} = num / tl.sum(num, axis=0) * scale"]],
              other='-float("inf")', scalars=[("scale", (0.5, 2.0, 10.0, 1.5))],
              kernel_scalars=lambda c: [("scale", "self.scale")], imports_f=True, level=2,
              description="fused softmax and scale"),
    RowFamily("logsumexp_relu", "Takes logsumexp over the last dimension (kept), then ReLU.",
              [lambda c: [f"{c.x} = torch.logsumexp({c.x}, dim=-1, keepdim=True)", f"return torch.relu({c.x})"],
               lambda c: [f"return F.relu(torch.logsumexp({c.x}, dim=-1, keepdim=True))"],
               lambda c: (["self.relu = nn.ReLU()"], [f"{c.x} = torch.logsumexp({c.x}, -1, keepdim=True)",
                                                    f"return self.relu({c.x})"])],
              [lambda c: [f"row_max = tl.max({c.x}, axis=0)",
                          f"lse = row_max + tl.log(tl.sum(tl.exp({c.x} - row_max), axis=0))",
                          f"{c.out} = tl.maximum(lse, 0.0)"]],
              output="reduce_keepdim", other='-float("inf")', level=2, description="logsumexp then ReLU"),
    RowFamily("sum_div", "Sums over the last dimension, then divides by a constant.",
              [lambda c: [f"return torch.sum({c.x}, dim=-1) / self.divisor"],
               lambda c: [f"s = {c.x}.sum(dim=-1)", "return s / self.divisor"]],
              [lambda c: [f"{c.out} = tl.sum({c.x}, axis=0) / divisor"]], output="reduce",
              scalars=[("divisor", (2.0, 4.0, 10.0, 0.5))], kernel_scalars=lambda c: [("divisor", "self.divisor")],
              level=2, description="sum then divide"),
    RowFamily("max_subtract_exp", "Subtracts the row maximum and exponentiates.",
              [lambda c: [f"m = torch.max({c.x}, dim=-1, keepdim=True)[0]", f"return torch.exp({c.x} - m)"],
               lambda c: [f"return torch.exp({c.x} - {c.x}.amax(dim=-1, keepdim=True))"]],
              [lambda c: [f"{c.out} = tl.exp({c.x} - tl.max({c.x}, axis=0))"]], other='-float("inf")', level=2,
              description="max, subtract and exp chain"),
    RowFamily("mean_square_sqrt", "Takes the square root of the mean of squares over the last dimension.",
              [lambda c: [f"return torch.sqrt(torch.mean({c.x} ** 2, dim=-1))"],
               lambda c: [f"sq = {c.x} * {c.x}", "return sq.mean(dim=-1).sqrt()"]],
              [lambda c: [f"{c.out} = tl.sqrt(tl.sum({c.x} * {c.x}, axis=0) / {c.n_cols})"]], output="reduce",
              level=2, description="square, mean, sqrt chain"),
    # ---------------------------------------------------------------- Level 2: normalisation + activation
    RowFamily("layer_norm_gelu", "Applies layer normalisation over the last dimension, then GELU.",
              [lambda c: [f"{c.x} = {_ln_call(c, c.x)}", f"return F.gelu({c.x})"],
               lambda c: (["self.gelu = nn.GELU()"], [f"{c.x} = {_ln_call(c, c.x)}", f"return self.gelu({c.x})"])],
              [lambda c: _mean_var(c) + [f"{c.out} = diff * rstd * w + b", f"{c.out} = {_gelu(c.out)}"]],
              shared_init=_ln_init, init_params=[("SIZE", "int")], weights=_ln_weights, kernel_scalars=_ln_eps,
              imports_f=True, level=2, description="layer norm fused with GELU"),
    RowFamily("rms_norm_silu", "Applies RMS normalisation with a learned scale, then SiLU.",
              [lambda c: [f"{c.x} = {_rms_ref(c, c.x)}", f"return F.silu({c.x})"],
               lambda c: (["self.act = nn.SiLU()"], [f"{c.x} = {_rms_ref(c, c.x)}", f"return self.act({c.x})"])],
              [lambda c: RMS_COMPUTE(c) + [f"{c.out} = {c.out} * tl.sigmoid({c.out})"]],
              shared_init=RMS_INIT, init_params=[("SIZE", "int")], weights=lambda c: [("w", "self.weight")],
              kernel_scalars=lambda c: [("eps", "self.eps")], imports_f=True, level=2,
              description="RMS norm fused with SiLU"),
    RowFamily("layer_norm_residual", "Adds a residual and applies layer normalisation over the last dimension.",
              [lambda c: [f"{c.x} = {c.x} + {c.residual}", f"return {_ln_call(c, c.x)}"]],
              [lambda c: [f"{c.x} = {c.x} + r"] + _mean_var(c) + [f"{c.out} = diff * rstd * w + b"]],
              shared_init=_ln_init, init_params=[("SIZE", "int")], weights=_ln_weights, kernel_scalars=_ln_eps,
              residual=True, imports_f=True, level=2, description="residual add fused with layer norm"),
    RowFamily("l2_normalize_scale", "L2-normalises each row, then multiplies by a constant.",
              [lambda c: [f"{c.x} = F.normalize({c.x}, p=2, dim=-1)", f"return {c.x} * self.scale"]],
              [lambda c: [f"norm = tl.sqrt(tl.sum({c.x} * {c.x}, axis=0))",
                          f"{c.out} = {c.x} / tl.maximum(norm, 1e-12) * scale"]],
              scalars=[("scale", (2.0, 10.0, 0.5, 20.0))], kernel_scalars=lambda c: [("scale", "self.scale")],
              imports_f=True, level=2, description="L2 normalisation then scale"),
]

ATTRS = ("norm", "ln", "layer_norm", "norm_layer")
_PROBE = Ctx(x="x", out="out", n_cols="n", mask="mask", cols="cols", sizes=("b", "d"), dim="-1", attr="norm",
             style=DEFAULT_STYLE)  # to ask a family whether it has learned weights


def loop_note(fam: RowFamily, block: str) -> str:
    """The looping kernel's comment: how it walks the row."""
    stats = loop.ROW_LOOPS.get(fam.family, ("scan",))[0]
    how = {"max_sumexp": "the row's max and sum of exp(x - max) first, then",
           "max": "the row's max first, then", "mean_var": "the mean and variance first (fp32), then",
           "sumsq": "the sum of squares first, then", "sum": "a running sum, then",
           "scan": "each tile's scan plus the carry of the tiles before"}[stats]
    tail = {"row": " the normalised row", "reduce": " one value", "reduce_keepdim": " one value"}[fam.output]
    if stats == "scan":
        tail = ", back to front" if fam.family == "reverse_cumsum" else ""
    return f"one program per row, walked in {block}-wide tiles (any row length): {how}{tail}"


def render_row(fam: RowFamily, rng: random.Random, dtype: str, style: Style) -> Example:
    rank = rng.choice(fam.rank)
    sizes = style.pick_name({2: SIZES_2D, 3: SIZES_3D, 4: SIZES_4D}[rank])
    x = style.pick_name(X_NAMES, salt=1)
    style = avoid_clashes(style, [*sizes, x, "residual"])
    # the form: a loop over tiles (rowwise_loop.py), or one tile for a minority whose shown row is short
    pub = loop.published_rows(rng, rank) if style.sizes == "published" else None
    one_tile_max = loop.ONE_TILE_MAX if fam.max_cols >= 256 else 1024 if fam.max_cols >= 128 else 0
    looping = rng.random() >= loop.ONE_TILE_SHARE or (pub is not None and loop.row_len(pub, rank) > one_tile_max)
    cap = rng.choice(loop.NEAR_ONE_CAPS if fam.input_kind == "near_one" else loop.CAPS[:5] if rank == 4
                     else loop.CAPS[:6] if rank == 3 else loop.CAPS)  # verified inputs within VERIFIED_MAX
    if looping:  # verified rows span 2-4 tiles of the kernel's own cap
        n = loop.verified_row(rng, cap)
        dims = [2, rng.choice((2, 3)), *loop.verified_plane(rng, n)] if rank == 4 else loop.verified_dims(rng, rank, n)
    elif rank == 2:
        dims = [rng.choice((2, 4, 8, 16)), rng.choice(tuple(d for d in (17, 32, 64, 100, 128, 256) if d <= fam.max_cols))]
    elif rank == 3:
        dims = [rng.choice((2, 4)), rng.choice((3, 8, 16)), rng.choice(tuple(d for d in (16, 33, 64) if d <= fam.max_cols))]
    else:
        dims = [rng.choice((2, 4)), rng.choice((3, 4, 8)), rng.choice((4, 8, 16)), rng.choice((4, 8, 16))]
    constants: list[tuple[str, object]] = list(zip(sizes, dims))

    dim_expr = "-1"
    init_params: list[tuple[str, str]] = []
    init_inputs: list[str] = []
    dim_name = style.pick_name(("dim", "reduce_dim", "axis", "dim"), salt=2) if fam.dim_param else ""
    if dim_name in sizes:
        dim_name = "reduce_dim"
    if fam.dim_param:
        choices = (1, -1) if rank == 2 else (1, 2, -1, 0)
        dim_value = rng.choice(choices)
        constants.append((dim_name, dim_value))
        init_params.append((dim_name, "int"))
        init_inputs.append(dim_name)
        dim_expr = f"self.{dim_name}"
    for p, t in fam.init_params:
        name = sizes[-1] if p == "SIZE" else sizes[1]
        init_params.append((name, t))
        init_inputs.append(name)
    scal = {name: rng.choice(choices) for name, choices in fam.scalars}
    for name, v in scal.items():
        constants.append((name, v))
        init_params.append((name, "float"))
        init_inputs.append(name)

    c = Ctx(x=x, out=style.pick(("out", "y", "result", "out"), salt=4), n_cols=style.pick_name(("n_cols", "n", "N_COLS", "row_len")),
            mask=style.mask, cols=style.pick(("cols", "col_offsets", "offs")), sizes=sizes, dim=dim_expr,
            attr=style.pick(ATTRS, salt=5), style=style, params=scal)
    if c.n_cols in sizes:
        c.n_cols = "n_cols"
    init_lines = [f"self.{dim_name} = {dim_name}"] if fam.dim_param else []
    init_lines += [f"self.{n} = {n}" for n in scal]
    init_lines += fam.shared_init(c)

    shape = list(sizes)
    inputs = [(x, _input(fam.input_kind, shape, dtype))]
    fwd_args = [x]
    if fam.residual:
        inputs.append((c.residual, randn(shape, dtype)))
        fwd_args.append(c.residual)
    fwd = style.pick(fam.forms)(c)
    own_init, fwd = fwd if isinstance(fwd, tuple) else ([], fwd)
    ref = RefSpec(doc=fam.doc, init_params=init_params, init_lines=init_lines + own_init, forward_args=fwd_args,
                  forward_lines=fwd, constants=constants, inputs=inputs, init_inputs=init_inputs,
                  forward_doc="the result of the operation.",
                  imports=["import torch.nn.functional as F"] if any("F." in ln for ln in fwd) else [],
                  arg_docs={sizes[-1]: "Length of the normalised last dimension."} if fam.init_params and not fam.cols_4d
                  else {sizes[1]: "Number of channels."} if fam.init_params else {})
    if pub is not None:  # KernelBench-like sizes, long rows for the looping form; 64-bit offsets past 2**31
        ref.published = dict(zip(sizes, pub))
        style = scale.with_offsets(style, math.prod(pub))

    # ---- kernel
    kname = style.kernel(fam.family)
    weights = fam.weights(c)
    kscal = fam.kernel_scalars(c)
    xp, op = style.ptr(x), style.ptr("out" if c.out != "out" else "y")
    rp = style.ptr("res")
    block = style.block
    args = [xp] + ([rp] if fam.residual else []) + [style.ptr(w) for w, _ in weights] + [op, c.n_cols]
    args += [k for k, _ in kscal]
    reverse = fam.family == "reverse_cumsum"
    idx = f"({c.n_cols} - 1 - {c.cols})" if reverse else c.cols
    if looping:  # 64-bit row offsets: the row's index widened, or its start
        wide_row = style.int64 and style.phrasing % 2 == 0
        wide_start = style.int64 and not wide_row
        body = ["row = tl.program_id(0).to(tl.int64)" if wide_row else "row = tl.program_id(0)",
                f"row_start = row{'.to(tl.int64)' if wide_start else ''} * {c.n_cols}"]
        lp = loop.Loop(x=x, out=c.out, n=c.n_cols, mask=c.mask, cols=c.cols, block=block, xp=xp, op=op,
                       rp=rp if fam.residual else "", weights=tuple(w for w, _ in weights),
                       ptr=tuple(style.ptr(w) for w, _ in weights), reverse=reverse, phrasing=style.phrasing)
        body += loop.row_loop_body(fam.family, fam.output, lp, style.variant)
    else:
        body = ["row = tl.program_id(0).to(tl.int64)" if style.int64 else "row = tl.program_id(0)",
                f"{c.cols} = tl.arange(0, {block})",
                f"{c.mask} = {c.cols} < {c.n_cols}",
                f"row_start = row * {c.n_cols}"]
        body.append(f"{x} = tl.load({xp} + row_start + {idx}, mask={c.mask}, other={fam.other}).to(tl.float32)")
        if fam.residual:
            body.append(f"r = tl.load({rp} + row_start + {c.cols}, mask={c.mask}, other=0.0).to(tl.float32)")
        for w, _ in weights:
            body.append(f"{w} = tl.load({style.ptr(w)} + {c.cols}, mask={c.mask}, other=0.0).to(tl.float32)")
        body += style.pick(fam.compute, salt=6)(c)
        if fam.output == "row":
            body.append(f"tl.store({op} + row_start + {idx}, {c.out}, mask={c.mask})")
    if fam.output != "row":
        body.append(f"tl.store({op} + row, {c.out})")
    whole = f"one program per row reduces it, loaded whole, to one value (rows of at most {loop.ONE_TILE_MAX})"
    note = loop_note(fam, block) if looping else {
        "row": f"one program per row; the whole row fits in one block (rows of at most {loop.ONE_TILE_MAX} elements)",
        "reduce": whole, "reduce_keepdim": whole}[fam.output]
    if reverse and not looping:
        note = "one program per row, read and written back to front so the scan runs from the end (one block a row)"
    kernel = ("@triton.jit\n" f"def {kname}({', '.join(args)}, {block}: tl.constexpr):\n"
              + comment(style, note) + "\n".join(f"    {ln}" for ln in body) + "\n")

    # ---- launcher
    launch: list[str] = []
    move = fam.dim_param
    if move:
        launch.append(f"{x} = {x}.movedim(dim, -1).contiguous()")
    else:
        launch.append(f"{x} = {x}.contiguous()")
    if fam.residual:
        launch.append(f"{c.residual} = {c.residual}.contiguous()")
    if fam.cols_4d:
        launch.append(f"{c.n_cols} = {x}.shape[-2] * {x}.shape[-1]")
    else:
        launch.append(f"{c.n_cols} = {x}.shape[-1]")
    launch.append(f"n_rows = {x}.numel() // {c.n_cols}")
    res = "out" if c.out != "out" else "y"
    dtype_expr = fam.out_dtype or f"{x}.dtype"
    if fam.output == "row":
        launch.append(f"{res} = torch.empty_like({x})")
    else:
        shp = f"{x}.shape[:-1]" if fam.output == "reduce" else f"{x}.shape[:-1] + (1,)"
        launch.append(f"{res} = torch.empty({shp}, dtype={dtype_expr}, device={x}.device)")
    launch.append(f"{block} = min(triton.next_power_of_2({c.n_cols}), {cap})" if looping
                  else f"{block} = triton.next_power_of_2({c.n_cols})")
    kargs = [x] + ([c.residual] if fam.residual else []) + [w for w, _ in weights] + [res, c.n_cols] + [k for k, _ in kscal]
    launch.append(f"{kname}[(n_rows,)]({', '.join(kargs)}, {block}={block})")
    if move and fam.output == "row":
        launch.append(f"return {res}.movedim(-1, dim)")
    else:
        launch.append(f"return {res}")

    fn = style.pick_name(("{}", "triton_{}", "{}_forward", "launch_{}"), salt=3).format(fam.family)
    if fn == kname:
        fn = f"launch_{fam.family}"
    params = [x] + ([c.residual] if fam.residual else []) + [w for w, _ in weights] + [k for k, _ in kscal]
    call_args = [x] + ([c.residual] if fam.residual else []) + [e for _, e in weights] + [e for _, e in kscal]
    if move:
        params.insert(1, "dim")
        call_args.insert(1, dim_expr)
    if style.launcher == "function" or move:
        doc = ('    """One program per row of the last dimension' + (', walked in tiles."""\n' if looping else '."""\n')
               if style.sol_docstrings else "")
        helper = f"def {fn}({', '.join(params)}):\n" + doc + "\n".join(f"    {ln}" for ln in launch) + "\n"
        helpers = [helper]
        forward = [f"return {fn}({', '.join(call_args)})"]
    else:
        helpers = []
        bind = [f"{k} = {e}" for (k, e) in [*weights, *kscal]]
        forward = bind + launch
    jit_helpers = [MUL_COMBINE] if looping and fam.family == "cumprod" else fam.helpers
    sol = SolSpec(kernels=[*jit_helpers, kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    shape_desc = dict(zip(sizes, dims))
    if fam.dim_param:
        shape_desc[dim_name] = dim_value
    return make_example(fam.family, ref, sol, style, fam.description or fam.doc, dtype, shape_desc)


def templates() -> list[TemplateInfo]:
    out = []
    for f in FAMILIES:
        render = render_reduce if (f.output == "reduce" and f.dim_param) else render_row
        # A task's inputs must match its weights' dtype (the reference runs as written); tasks with
        # learned parameters stay fp32 and meet half precision in the verifier's dtype variation.
        dtypes = ("float32",) if f.weights(_PROBE) else f.dtypes
        out.append(TemplateInfo(f.family, lambda rng, dtype, style, f=f, r=render: r(f, rng, dtype, style), dtypes))
    out.append(TemplateInfo("swiglu", render_swiglu, ("float32", "float16")))
    return out
