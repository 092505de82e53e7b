"""What the Level-2 reduction epilogues share (reduce_rows.py, reduce_conv.py, reduce_norm.py).

A heavy op kept in PyTorch (epilogue.py's draw_heavy), a chain of cheap ops (epilogue.py's), a
reduction or a normaliser (softmax, centring, L2 / layer / group norm), then a chain after it, all in
ONE Triton kernel. The kernel walks tiles of the heavy op's output: one pass over the tiles per
statistic, the chain before it recomputed on every pass, then the result; or, where one tile holds
the whole reduced extent, one load and every statistic on registers (the softmax tutorial's form).
Accumulation is in float32 over 64-bit offsets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import Example, SolSpec, Style, comment, render_reference, render_solution
from .epilogue import OP_WORDS, OPS, WEIGHTS, Build, Heavy

PARAM_OPS = ("bias", "mul_param", "sub_param")
# kernel and launcher locals: no chain constant or parameter may take these names
LOCALS = {"mask", "ch_mask", "col_mask", "base", "total", "mean", "var", "mx", "mn", "se", "ss", "rstd", "acc", "idx",
          "g", "per_group", "group_len", "groups", "pooled", "batch", "rows", "n_cols", "eps", "num_groups",
          "norm_weight", "norm_bias", "nw", "nb", "grid", "out_shape", "BLOCK_C", "BLOCK_S", "BLOCK_R", "BLOCK_I",
          "BLOCK_CH", "BLOCK_HW", "BLOCK_N"}

# statistic -> (its kernel name, a tile's masked contribution ({m} the mask, {bc} a statistic broadcast
# back over the tile), how tiles combine, divided by the reduced count)
STATS = {
    "sum": ("total", "tl.where({m}, y, 0.0)", "sum", False),
    "mean": ("mean", "tl.where({m}, y, 0.0)", "sum", True),
    "max": ("mx", 'tl.where({m}, y, float("-inf"))', "max", False),
    "min": ("mn", 'tl.where({m}, y, float("inf"))', "min", False),
    "sumexp": ("se", "tl.where({m}, tl.exp(y - mx{bc}), 0.0)", "sum", False),
    "sumsq": ("ss", "tl.where({m}, y * y, 0.0)", "sum", False),
    "var": ("var", "tl.where({m}, (y - mean{bc}) * (y - mean{bc}), 0.0)", "sum", True),
}
_INIT = {"sum": "tl.zeros({shape}, dtype=tl.float32)", "max": 'tl.full({shape}, float("-inf"), dtype=tl.float32)',
         "min": 'tl.full({shape}, float("inf"), dtype=tl.float32)'}
_UPDATE = {"sum": "acc += {x}", "max": "acc = tl.maximum(acc, {x})", "min": "acc = tl.minimum(acc, {x})"}

# a reduction -> (the statistics it needs, its value)
REDUCE = {"sum": (("sum",), "total"), "mean": (("mean",), "mean"), "max": (("max",), "mx"), "min": (("min",), "mn"),
          "logsumexp": (("max", "sumexp"), "mx + tl.log(se)"), "norm": (("sumsq",), "tl.sqrt(ss)")}
# a normaliser -> (the statistics it needs, the value of each element `y`)
NORMALIZE = {"softmax": (("max", "sumexp"), "tl.exp(y - mx{bc}) / se{bc}"),
             "log_softmax": (("max", "sumexp"), "y - mx{bc} - tl.log(se{bc})"),
             "center": (("mean",), "y - mean{bc}"), "max_sub": (("max",), "y - mx{bc}"),
             "l2norm": (("sumsq",), "y / tl.maximum(tl.sqrt(ss{bc}), 1e-12)"),
             "layer_norm": (("mean", "var"), "(y - mean{bc}) / tl.sqrt(var{bc} + eps)")}

REDUCE_WORDS = {"sum": "a sum over {d}", "mean": "a mean over {d}", "max": "a maximum over {d}",
                "min": "a minimum over {d}", "logsumexp": "logsumexp over {d}", "norm": "the L2 norm over {d}",
                "softmax": "softmax over {d}", "log_softmax": "log-softmax over {d}",
                "center": "the mean over {d} subtracted", "max_sub": "the maximum over {d} subtracted",
                "l2norm": "L2 normalisation over {d}", "layer_norm": "layer normalisation over {d}"}


def reduce_forms(what: str, v: str, d: str, keepdim: bool) -> list[str]:
    """The ways people write reduction `what` of `v` over dim `d` (the reference's expression)."""
    kd = ", keepdim=True" if keepdim else ""
    return {
        "sum": [f"torch.sum({v}, dim={d}{kd})", f"{v}.sum(dim={d}{kd})", f"{v}.sum({d}{kd})"],
        "mean": [f"torch.mean({v}, dim={d}{kd})", f"{v}.mean(dim={d}{kd})", f"{v}.mean({d}{kd})"],
        "max": [f"torch.max({v}, dim={d}{kd})[0]", f"torch.amax({v}, dim={d}{kd})", f"{v}.max(dim={d}{kd}).values",
                f"torch.max({v}, {d}{kd}).values"],
        "min": [f"torch.min({v}, dim={d}{kd})[0]", f"torch.amin({v}, dim={d}{kd})", f"{v}.min(dim={d}{kd})[0]"],
        "logsumexp": [f"torch.logsumexp({v}, dim={d}{kd})", f"{v}.logsumexp(dim={d}{kd})"],
        "norm": [f"torch.norm({v}, p=2, dim={d}{kd})", f"{v}.norm(dim={d}{kd})",
                 f"torch.linalg.vector_norm({v}, dim={d}{kd})"],
    }[what]


def normalize_forms(b: Build, what: str, d: str) -> list[str]:
    """The reference's lines (`{v}` the tensor) of normaliser `what` over dim `d`, one form drawn."""
    v = b.v
    if what in ("softmax", "log_softmax"):
        fn = what
        forms = [f"torch.{fn}({v}, dim={d})", f"F.{fn}({v}, dim={d})", f"{v}.{fn}(dim={d})", "module"]
        form = b.pick(forms)
        if form == "module":
            ctor = "nn.Softmax" if fn == "softmax" else "nn.LogSoftmax"
            form = f"{b.module((fn, 'act'), f'{ctor}(dim={d})')}({v})"
        return [f"{v} = {form}"]
    if what == "center":
        return [b.pick([f"{v} = {v} - {v}.mean(dim={d}, keepdim=True)",
                        f"{v} = {v} - torch.mean({v}, dim={d}, keepdim=True)"])]
    if what == "max_sub":
        return [b.pick([f"{v} = {v} - torch.max({v}, dim={d}, keepdim=True)[0]",
                        f"{v} = {v} - {v}.amax(dim={d}, keepdim=True)"])]
    if what == "l2norm":
        return [b.pick([f"{v} = F.normalize({v}, p=2, dim={d})", f"{v} = F.normalize({v}, dim={d})",
                        f"{v} = {v} / {v}.norm(dim={d}, keepdim=True).clamp_min(1e-12)"])]
    raise KeyError(what)


# --------------------------------------------------------------------------- chains


@dataclass(frozen=True)
class Mark:
    """Where one stage of a chain starts in a Build's lists."""

    fwd: int
    body: int
    ops: int
    loads: int


def mark(b: Build) -> Mark:
    return Mark(len(b.fwd), len(b.body), len(b.ops), len(b.loads))


def draw_post(b: Build, n: int, params: bool) -> None:
    """`n` ops after a reduction (never the same twice in a row; learned parameters only where the
    reduced tensor still has its channels, `params`; no residual)."""
    names = [op for op in WEIGHTS if params or op not in PARAM_OPS]
    last = None
    for _ in range(n):
        while True:
            op = b.rng.choices(names, weights=[WEIGHTS[o] for o in names])[0]
            if op != last:
                break
        OPS[op](b)
        b.ops.append(op)
        last = op


def words(ops: list[str], heavy: Heavy) -> str:
    per = "per-feature" if heavy.per_feature else "per-channel"
    what = "GEMM" if heavy.is_gemm else "convolution"
    return ", ".join(OP_WORDS[o].format(per=per, heavy=what) for o in ops)


def doc_of(heavy: Heavy, pre: list[str], middle: str, post: list[str]) -> str:
    head = f"{heavy.desc[0].upper()}{heavy.desc[1:]}, "
    steps = words(pre, heavy)
    text = head + (steps + ", then " if steps else "then ") + middle
    return text + (f", then {words(post, heavy)}." if post else ".")


# --------------------------------------------------------------------------- kernels


@dataclass
class Walk:
    """How a kernel walks the tiles of the heavy op's output to reduce one extent."""

    loop: str | None  # the loop header over tiles; None: one tile holds the reduced extent
    tile: list[str]  # the lines making the tile's `y` (load, the heavy op's bias, parameters, the chain before)
    m: str  # the mask of the reduced extent within a tile
    shape: str  # the accumulator's shape
    axis: int  # the reduced axis of a tile
    bc: str  # a statistic broadcast back over the tile: "", "[None, :]", "[:, None]"
    n: str  # the reduced count

    @property
    def single(self) -> bool:
        return self.loop is None


def stat_lines(w: Walk, stats: tuple[str, ...]) -> list[str]:
    """The statistics: one pass over the tiles each, or (one tile) straight from registers."""
    out: list[str] = []
    for s in stats:
        name, part, how, div = STATS[s]
        part = part.format(m=w.m, bc=w.bc)
        tail = f" / {w.n}" if div else ""
        if w.single:
            out.append(f"{name} = tl.{how}({part}, axis={w.axis}){tail}")
            continue
        out.append("acc = " + _INIT[how].format(shape=w.shape))
        out.append(w.loop)
        out += [f"    {ln}" for ln in w.tile]
        out.append("    " + _UPDATE[how].format(x=part))
        out.append(f"{name} = tl.{how}(acc, axis={w.axis}){tail}")
    return out


def over_tiles(w: Walk, body: list[str]) -> list[str]:
    """`body` (which writes the tile) once per tile: in the loop, recomputing `y`, or after the one tile."""
    if w.single:
        return body
    return [w.loop] + [f"    {ln}" for ln in w.tile + body]


def load_params(style: Style, attrs: list[str], index: str, mask: str) -> list[str]:
    return [f"{a} = tl.load({style.ptr(a)} + {index}, mask={mask}, other=0.0).to(tl.float32)" for a in attrs]


def pre_loads(heavy: Heavy, b: Build, style: Style, attrs: list[str], index: str, mask: str) -> list[str]:
    """The heavy op's bias (moved into the kernel), the chain's parameters at `index`, the residual's copy."""
    out = []
    if heavy.kernel_bias:
        out.append(f"y = y + tl.load({style.ptr('heavy_bias')} + {index}, mask={mask}, other=0.0).to(tl.float32)")
    out += load_params(style, attrs, index, mask)
    if b.residual:
        out.append("res = y")
    return out


def jit(name: str, args: list[str], consts: list[str], style: Style, what: str, lines: list[str]) -> str:
    sig = ", ".join(args + [f"{c}: tl.constexpr" for c in consts])
    return f"@triton.jit\ndef {name}({sig}):\n" + comment(style, what) + "\n".join(f"    {ln}" for ln in lines) + "\n"


def grid_line(style: Style, dims: str) -> str:
    return f"grid = lambda meta: ({dims})" if style.grid == "lambda" else f"grid = ({dims})"


def store_cast(style: Style, value: str, out_p: str) -> str:
    return f"{value}.to({out_p}.dtype.element_ty)" if style.variant % 2 else value


# --------------------------------------------------------------------------- the example


def finish(family: str, heavy: Heavy, b: Build, style: Style, ref, kname: str, kernel: str, launch: list[str],
           params: list[str], exprs: list[str], fused: str, description: str, dtype: str, dims: dict) -> Example:
    """The example: the heavy call kept in PyTorch, then the launch (inline in forward, every launch
    argument written as the module's attribute, or in a helper function forward calls)."""
    note = ("The GEMM" if heavy.is_gemm else "The convolution") + f" stays in PyTorch; {fused} one Triton kernel."
    params = params + b.scalars
    exprs = exprs + [f"self.{s}" for s in b.scalars]
    head = ([f"# {note}"] if style.comments else []) + [heavy.sol_line]
    if style.launcher != "function":
        subs = dict(zip(params, exprs))
        body = [re.sub(r"(?<![\w.])(\w+)\b(?!\s*=[^=])", lambda m: subs.get(m.group(1), m.group(1)), ln)
                for ln in launch]
        helpers, forward = [], head + body
    else:
        fn = style.pick_name(("fused_{}", "launch_{}", "{}_forward", "triton_{}"), salt=3).format(family)
        if fn == kname:
            fn = f"launch_{family}"
        doc = ['    """Runs the fused epilogue over the output of the heavy op."""'] if style.sol_docstrings else []
        helpers = [f"def {fn}({', '.join(['y', *params])}):\n" + "\n".join(doc + [f"    {ln}" for ln in launch]) + "\n"]
        forward = head + [f"return {fn}({', '.join(['y', *exprs])})"]
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=heavy.init_lines + b.init_lines,
                  imports=["import torch.nn.functional as F"] if "F." in heavy.sol_line else [])
    return Example(family, render_reference(ref, style), render_solution(ref, sol, style), description, dtype, dims,
                   style)
