"""What the Level-2 reduction epilogues share (reduce_rows.py, reduce_conv.py, reduce_norm.py).

A heavy op kept in PyTorch (epilogue.py's draw_heavy), a chain of cheap ops (epilogue.py's), a
reduction or a normaliser (softmax, centring, L2 / layer / group norm), then a chain after it, all in
ONE Triton kernel. The kernel walks bounded tiles of the heavy op's output, so it is right and compiles
at any size (KernelBench's published sizes reduce over up to 262,144 elements), in one of three forms
(`loop_form`):

- "passes": one pass over the tiles per statistic, the chain before it recomputed on every pass (the
  maximum before the sum of exponentials, two-pass variance), then the result;
- "online": one pass for every statistic: a running maximum and sum of exponentials rescaled as the
  maximum grows (softmax, logsumexp), Welford's mean and M2 per lane (layer and group norm), a tile's
  reduction added to the accumulator (one statistic over a 2-D tile);
- "fits": a `tl.constexpr` flag the launcher sets when the reduced extent fits one tile (at most a few
  thousand elements): then one load and every statistic on registers (the softmax tutorial's form),
  else the passes.

No tile spans more than TILE_DIM_CAP elements a dim or TILE_CAP a program. Accumulation is in float32
over 64-bit offsets. The published twin of the reference (`published_sizes`): KernelBench-like sizes
the prompt shows, while the verifier runs the small ones.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

from .base import Example, RefSpec, SolSpec, Style, comment, make_example
from .epilogue import (CONV_KINDS, OP_WORDS, OPS, WEIGHTS, X_NAMES, Build, Heavy, draw_chain, draw_heavy,
                       start_build, untraced)
from .helper_args import helper_launch

PARAM_OPS = ("bias", "mul_param", "sub_param")
# kernel and launcher locals: no chain constant or parameter may take these names
LOCALS = {"mask", "ch_mask", "col_mask", "base", "total", "mean", "var", "mx", "mn", "se", "ss", "rstd", "acc", "idx",
          "g", "per_group", "group_len", "groups", "pooled", "batch", "rows", "n_cols", "eps", "num_groups",
          "norm_weight", "norm_bias", "nw", "nb", "grid", "out_shape", "BLOCK_C", "BLOCK_S", "BLOCK_R", "BLOCK_I",
          "BLOCK_CH", "BLOCK_HW", "BLOCK_N", "run_max", "run_sum", "new_max", "w_cnt", "w_mean", "w_m2", "delta",
          "fin", "fin_max", "fin_sum", "cstart", "ONE_TILE", "SINGLE_TILE", "FITS"}
TILE_DIM_CAP = 4096  # the most elements a tile spans along one dim
TILE_CAP = 8192  # the most elements of one program's tile (the product of its dims)
MAX_PUBLISHED = 300_000_000  # elements of a published input plus the heavy op's output
FORMS = ("fits", "passes", "online")
FLAGS = ("ONE_TILE", "SINGLE_TILE", "FITS")  # the constexpr of the "fits" form

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


def start(rng: random.Random, style: Style, kinds: tuple[str, ...],
          chain_lengths: tuple[int, ...] = (0, 1, 1, 2, 2, 3)) -> tuple[str, Heavy, Build, Mark]:
    """The input's name, the heavy op (one of `kinds`), the build with the kernel's own locals taken, the
    chain drawn before the reduction, and where that chain ends."""
    x = style.pick_name(X_NAMES, salt=1)
    heavy = draw_heavy(rng, style, x, rng.choice(kinds))
    b = start_build(rng, style, heavy, x)
    b.taken |= LOCALS
    draw_chain(b, rng.choice(chain_lengths))
    return x, heavy, b, mark(b)


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
    rshape: str = ""  # a 2-D tile's reduced shape: the "online" form adds each tile's reduction into it
    traced: bool = field(default=False, init=False, repr=False, compare=False)  # a pass took the tile's comments

    @property
    def single(self) -> bool:
        return self.loop is None

    def pass_tile(self) -> list[str]:
        """The tile's lines for one pass over it: the chain's trace comments (epilogue.Build.emit, trace) in
        the first pass only. Every pass recomputes the chain; its trace is read once, in order."""
        if self.traced:
            return untraced(self.tile)
        self.traced = True
        return list(self.tile)


def loop_form(style: Style) -> str:
    """How an example's kernel walks the reduced extent: "fits", "passes" or "online" (the module doc)."""
    return FORMS[style.variant % 3]


def _online_max_sumexp(w: Walk) -> list[str]:
    """The maximum and the sum of exponentials below it in one pass: per lane, the sum rescaled whenever
    the lane's maximum grows (masked lanes stay at -1e30 and add nothing), then the lanes combined."""
    return [f"run_max = tl.full({w.shape}, -1e30, dtype=tl.float32)", f"run_sum = tl.zeros({w.shape}, dtype=tl.float32)",
            w.loop, *[f"    {ln}" for ln in w.pass_tile()],
            f"    new_max = tl.maximum(run_max, tl.where({w.m}, y, -1e30))",
            f"    run_sum = run_sum * tl.exp(run_max - new_max) + tl.where({w.m}, tl.exp(y - new_max), 0.0)",
            "    run_max = new_max",
            f"mx = tl.max(run_max, axis={w.axis})",
            f"se = tl.sum(run_sum * tl.exp(run_max - mx{w.bc}), axis={w.axis})"]


def _welford(w: Walk) -> list[str]:
    """The mean and the variance in one pass: Welford's count, mean and M2 per lane, then the lanes
    combined (Chan's formula: the lanes' M2 plus their count times their mean's squared distance)."""
    return [f"w_cnt = tl.zeros({w.shape}, dtype=tl.float32)", f"w_mean = tl.zeros({w.shape}, dtype=tl.float32)",
            f"w_m2 = tl.zeros({w.shape}, dtype=tl.float32)", w.loop, *[f"    {ln}" for ln in w.pass_tile()],
            f"    w_cnt += tl.where({w.m}, 1.0, 0.0)",
            f"    delta = tl.where({w.m}, y - w_mean, 0.0)",
            "    w_mean += delta / tl.maximum(w_cnt, 1.0)",
            f"    w_m2 += delta * tl.where({w.m}, y - w_mean, 0.0)",
            f"mean = tl.sum(w_mean * w_cnt, axis={w.axis}) / {w.n}",
            f"var = tl.sum(w_m2 + w_cnt * (w_mean - mean{w.bc}) * (w_mean - mean{w.bc}), axis={w.axis}) / {w.n}"]


def stat_lines(w: Walk, stats: tuple[str, ...], online: bool = False) -> list[str]:
    """The statistics: one pass over the tiles each, (`online`) one pass for all of them, or (one tile)
    straight from registers."""
    if online and not w.single:
        if stats == ("max", "sumexp"):
            return _online_max_sumexp(w)
        if stats == ("mean", "var"):
            return _welford(w)
        if len(stats) == 1 and w.rshape:  # each tile reduced, then added in
            name, part, how, div = STATS[stats[0]]
            tile_part = f"tl.{how}({part.format(m=w.m, bc=w.bc)}, axis={w.axis})"
            return (["acc = " + _INIT[how].format(shape=w.rshape), w.loop] + [f"    {ln}" for ln in w.pass_tile()]
                    + ["    " + _UPDATE[how].format(x=tile_part), f"{name} = acc" + (f" / {w.n}" if div else "")])
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
        out += [f"    {ln}" for ln in w.pass_tile()]
        out.append("    " + _UPDATE[how].format(x=part))
        out.append(f"{name} = tl.{how}(acc, axis={w.axis}){tail}")
    return out


def over_tiles(w: Walk, body: list[str]) -> list[str]:
    """`body` (which writes the tile) once per tile: in the loop, recomputing `y`, or after the one tile."""
    if w.single:
        return body
    return [w.loop] + [f"    {ln}" for ln in w.pass_tile() + body]


def indent(lines: list[str], by: str = "    ") -> list[str]:
    return [f"{by}{ln}" for ln in lines]


def fits_branch(flag: str, one_tile: list[str], tiles: list[str]) -> list[str]:
    """The "fits" form's kernel: `one_tile` under the constexpr `flag` (the launcher set it: the extent
    fits one bounded tile), else `tiles`, the loop over tiles."""
    return [f"if {flag}:"] + indent(one_tile) + ["else:"] + indent(tiles)


def fits_launch(rng: random.Random, flag: str, blk: str, extent: str, limit: int, cap: int) -> list[str]:
    """The launcher's lines of the "fits" form: one tile of next_power_of_2(extent) elements when that is
    at most `limit`, else tiles of `cap` (no tile grows with the extent)."""
    assert cap <= limit <= TILE_DIM_CAP
    if rng.random() < 0.5:
        return [f"{flag} = {extent} <= {limit}",
                f"{blk} = triton.next_power_of_2({extent}) if {flag} else {cap}"]
    return [f"{blk} = triton.next_power_of_2({extent})", f"{flag} = {blk} <= {limit}",
            f"if not {flag}:", f"    {blk} = {cap}  # the extent is looped over in tiles"]


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


def finish(family: str, heavy: Heavy, b: Build, style: Style, ref: RefSpec, kname: str, kernel: str,
           launch: list[str], params: list[str], exprs: list[str], fused: str, description: str, dtype: str,
           dims: dict) -> Example:
    """The example: the heavy call kept in PyTorch, then the launch (inline in forward, every launch
    argument written as the module's attribute, or in a helper function forward calls); the reference's
    published twin where `ref.published` holds its sizes."""
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
        helpers, forward = helper_launch(style, family, kname, head, launch, params, exprs)
    # __init__ is the reference's, activation modules included (as epilogue.finish_epilogue)
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None,
                  imports=["import torch.nn.functional as F"] if "F." in heavy.sol_line else [])
    return make_example(family, ref, sol, style, description, dtype, dims)


# --------------------------------------------------------------------------- published sizes


def _conv_settings(heavy: Heavy) -> tuple[int, int, int, int]:
    """(kernel_size, stride, padding, output_padding) of the heavy convolution, read from its constructor
    call (a keyword's value a constant's name or a literal)."""
    consts = dict(heavy.constants)
    init = heavy.init_lines[0]

    def setting(name: str, default: int) -> int:
        m = re.search(rf"\b{name}=(\w+)", init)
        if m is None:
            return default
        return int(m.group(1)) if m.group(1).isdigit() else int(consts[m.group(1)])

    return int(consts["kernel_size"]), setting("stride", 1), setting("padding", 0), setting("output_padding", 0)


def heavy_output(heavy: Heavy, sizes: dict) -> int:
    """Elements of the heavy op's output at `sizes` (the heavy op's dims by name)."""
    shape = [sizes[n] for n in heavy.input_shape]
    if heavy.is_gemm:
        return math.prod(shape[:-1]) * sizes[heavy.pshape]
    transposed = CONV_KINDS[heavy.kind][1]
    k, stride, pad, out_pad = _conv_settings(heavy)
    outs = [(s - 1) * stride - 2 * pad + k + out_pad if transposed else (s + 2 * pad - k) // stride + 1
            for s in shape[2:]]
    return 0 if min(outs) < 1 else shape[0] * sizes[heavy.pshape.split(",")[0]] * math.prod(outs)


def published_sizes(rng: random.Random, heavy: Heavy) -> dict:
    """KernelBench-like sizes of the heavy op for the prompt (its Level-2 problems: batch 16-1024, GEMMs of
    512-8192 features, 16-128 output channels, 32x32-128x128 planes, 16x32x32-like volumes), input plus
    the heavy op's output under MAX_PUBLISHED elements; {} where no draw fits."""
    names = list(heavy.dims)
    for _ in range(60):
        if heavy.is_gemm:
            b, *rest = heavy.input_shape
            sizes = {b: rng.choice((128, 128, 256, 512, 1024) if len(rest) == 1 else (8, 16, 32, 64))}
            if len(rest) == 2:
                sizes[rest[0]] = rng.choice((64, 128, 256, 512))
            sizes[rest[-1]] = rng.choice((512, 1024, 2048, 4096, 8192))
            sizes[heavy.pshape] = rng.choice((512, 1024, 2048, 4096, 8192))
        else:
            nd = CONV_KINDS[heavy.kind][0]
            bn, cin, *spatial = heavy.input_shape
            cout = heavy.pshape.split(",")[0]
            sizes = {bn: rng.choice((16, 32, 64, 128, 128)), cin: rng.choice((3, 8, 16, 32, 64)),
                     cout: rng.choice((16, 32, 64, 64, 128))}
            if nd == 1:
                sides = [rng.choice((512, 1024, 2048, 4096, 8192))]
            elif nd == 2:
                side = rng.choice((32, 64, 64, 128))
                sides = [side, side if rng.random() < 0.75 else side * 2]
            else:
                side = rng.choice((16, 32, 32, 64))
                sides = [rng.choice((8, 16, 16)), side, side]
            sizes |= dict(zip(spatial, sides))
        out = heavy_output(heavy, sizes)
        if out and math.prod(sizes[n] for n in heavy.input_shape) + out <= MAX_PUBLISHED:
            return {n: sizes[n] for n in names}
    return {}
