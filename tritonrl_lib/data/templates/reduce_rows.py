"""Level-2 GEMM epilogues that reduce over the features: `nn.Linear` (or a matmul with a weight
parameter, its input 2-D or 3-D) kept in PyTorch, a chain of 0-3 cheap ops (epilogue.py's), then

- `gemm_reduce`: a reduction over the last dim (sum, mean, max, min, logsumexp, L2 norm; `dim=1` or
  `dim=-1`, keepdim or not, each written the ways people write it), then 0-2 ops on the reduced values;
- `gemm_softmax`: a normaliser over the last dim (softmax, log-softmax, the row's mean or maximum
  subtracted, L2 normalisation, layer norm as `nn.LayerNorm` or `F.layer_norm`), then 0-2 ops,
  learned per-feature parameters among them.

The solution keeps the GEMM in PyTorch and runs one Triton program per row of its output, which walks
the row in BLOCK-wide tiles (BLOCK at most 2048: KernelBench's rows run to 8192 features): one pass per
statistic with the chain recomputed, or one pass for all of them (an online maximum and sum of
exponentials, Welford's mean and variance), then the value (a reduction) or a last pass writing the
normalised row; or, in the "fits" form, the whole row in one tile on registers when the launcher finds
it short (at most 1024-4096 features), else the passes (reduce_common.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .base import Example, Style, TemplateInfo, avoid_clashes
from .epilogue import Build, Heavy, kernel_inputs, reference_spec, trace
from .reduce_common import (FLAGS, NORMALIZE, REDUCE, REDUCE_WORDS, TILE_DIM_CAP, Mark, Walk, doc_of,
                            draw_post, finish, fits_branch, fits_launch, grid_line, jit, load_params, loop_form, mark,
                            normalize_forms, over_tiles, pre_loads, published_sizes, reduce_forms, start,
                            stat_lines, store_cast)

HEAVY_KINDS = ("linear", "linear", "matmul")
ROW_CAPS = (32, 64, 256, 512, 1024, 1024, 2048)  # a tile of the "passes" and "online" forms
FITS = ((1024, (256, 512, 1024)), (2048, (512, 1024)), (4096, (1024, 2048)))  # "fits": (one tile up to, else tiles of)
assert max(ROW_CAPS) <= TILE_DIM_CAP and all(max(caps) <= limit <= TILE_DIM_CAP for limit, caps in FITS)
ROW_REDUCTIONS = ("sum", "sum", "mean", "mean", "max", "max", "min", "logsumexp", "logsumexp", "norm")
ROW_NORMALIZERS = ("softmax", "softmax", "log_softmax", "center", "max_sub", "l2norm", "layer_norm", "layer_norm")


def _setup(rng: random.Random, style: Style) -> tuple[str, Heavy, Build, Mark, str]:
    """The GEMM, the chain before the reduction, and the reduced dim as the reference writes it."""
    x, heavy, b, pre = start(rng, style, HEAVY_KINDS)
    d = rng.choice(("-1", "2")) if len(heavy.input_shape) == 3 else rng.choice(("1", "1", "-1"))
    return x, heavy, b, pre, d


def _where(d: str) -> str:
    return "the last dim" if d == "-1" else f"dim {d}"


def _row_walk(heavy: Heavy, b: Build, style: Style, pre: Mark, single: bool, traced: list[str]) -> Walk:
    blk = style.block
    tile = [f"feat = {'' if single else 'start + '}tl.arange(0, {blk})", "mask = feat < n_cols",
            f"y = tl.load({style.ptr('y')} + base + feat, mask=mask, other=0.0).to(tl.float32)"]
    tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "feat", "mask") + b.body[:pre.body] + trace(traced)
    loop = None if single else f"for start in range(0, n_cols, {blk}):"
    return Walk(loop, tile, "mask", f"({blk},)", 0, "", "n_cols")


def _launch(rng: random.Random, style: Style, kname: str, form: str, flag: str, out: str,
            call: list[str]) -> list[str]:
    blk = style.block
    if form == "fits":
        limit, caps = rng.choice(FITS)
        sizing = fits_launch(rng, flag, blk, "n_cols", limit, rng.choice(caps))
        consts = f"{blk}={blk}, {flag}={flag}"
    else:
        sizing = [f"{blk} = min(triton.next_power_of_2(n_cols), {rng.choice(ROW_CAPS)})"]
        consts = f"{blk}={blk}"
    return ["y = y.contiguous()", "n_cols = y.shape[-1]", "rows = y.numel() // n_cols", f"out = {out}", *sizing,
            grid_line(style, "rows,"), f"{kname}[grid]({', '.join(call)}, {consts})", "return out"]


def _row_kernel(heavy: Heavy, b: Build, style: Style, pre: Mark, form: str, flag: str, stats: tuple[str, ...],
                then: Callable[[Walk], list[str]], traced: list[str]) -> list[str]:
    """The kernel's lines after the row's base: the statistics and `then(walk)` (the lines using them), in
    the example's form (a constexpr branch between one tile and the passes for "fits"); `traced`, the
    reference's reduction line(s), commented above the first statistic."""
    loop = _row_walk(heavy, b, style, pre, False, traced)
    tiles = stat_lines(loop, stats, online=form == "online") + then(loop)
    if form != "fits":
        return tiles
    one = _row_walk(heavy, b, style, pre, True, traced)
    return fits_branch(flag, one.pass_tile() + stat_lines(one, stats) + then(one), tiles)


def _what(form: str, flag: str, stats: tuple[str, ...]) -> str:
    if form == "fits":
        return f"the whole row in one tile where {flag} (short rows), else a pass over the row's tiles per statistic"
    if form == "online" and len(stats) > 1:
        how = "running maximum and rescaled sum" if stats == ("max", "sumexp") else "Welford's mean and M2"
        return f"one pass over the row's tiles ({how} per lane)"
    return "a pass over the row's tiles per statistic, the chain recomputed"


def render_gemm_reduce(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "gemm_reduce"
    x, heavy, b, pre, d = _setup(rng, style)
    what = rng.choice(ROW_REDUCTIONS)
    keepdim = rng.random() < 0.5
    expr = rng.choice(reduce_forms(what, x, d, keepdim))
    n_post = rng.choice((0, 1, 1, 2))
    if n_post:
        b.fwd.append(f"{x} = {expr}")
    post = mark(b)
    draw_post(b, n_post, params=False)
    tail = [f"return {x}"] if n_post else rng.choice([[f"return {expr}"], [f"{x} = {expr}", f"return {x}"]])
    ops = b.ops[:pre.ops] + [f"{what}_lastdim"] + b.ops[pre.ops:]
    doc = doc_of(heavy, b.ops[:pre.ops], REDUCE_WORDS[what].format(d=_where(d)), b.ops[pre.ops:])
    shape_doc = "one value per row (the reduced dim kept with size 1)" if keepdim else "one value per row"
    ref = reference_spec(heavy, b, doc, tail, f"the reduced output, {shape_doc}.")
    style = avoid_clashes(style, sorted(b.taken))

    kname = style.kernel(f"{heavy.kind}_{what}")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    y_p, out_p = style.ptr("y"), style.ptr("out")
    form, flag = loop_form(style), style.pick_name(FLAGS, salt=5)
    stats, value = REDUCE[what]
    lines = ["row = tl.program_id(axis=0)", "base = row.to(tl.int64) * n_cols"]
    reduce_line = f"{x} = {expr}" if n_post else tail[0]
    lines += _row_kernel(heavy, b, style, pre, form, flag, stats, lambda w: [], [reduce_line])
    lines += [f"y = {value}"] + b.body[post.body:]
    lines.append(f"tl.store({out_p} + row, {store_cast(style, 'y', out_p)})")
    what_c = f"one program per row; {_what(form, flag, stats)}; then the {what}"
    consts = [style.block] + ([flag] if form == "fits" else [])
    kernel = jit(kname, [y_p, out_p, *ptrs, "n_cols", *b.scalars], consts, style, what_c, lines)
    out = ("torch.empty((*y.shape[:-1], 1), device=y.device, dtype=y.dtype)" if keepdim else
           "torch.empty(y.shape[:-1], device=y.device, dtype=y.dtype)")
    launch = _launch(rng, style, kname, form, flag, out, ["y", "out", *params, "n_cols", *b.scalars])
    if style.sizes == "published":
        ref.published = published_sizes(rng, heavy)
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                  "the chain, the reduction and what follows it are", f"fused GEMM epilogue with a reduction: "
                  f"{heavy.kind} -> {chain}", dtype, heavy.dims | {"chain": chain, "keepdim": int(keepdim)})


def _layer_norm(b: Build, heavy: Heavy, x: str) -> tuple[list[str], list[str], list[str]]:
    """A layer norm over the features: (reference lines, kernel params, their expressions in forward);
    as `nn.LayerNorm` (its weight and bias read by the kernel) or `F.layer_norm` (no affine)."""
    eps_arg = b.rng.random() < 0.35
    if eps_arg:
        b.constants.append(("eps", b.pick([1e-5, 1e-6, 1e-5])))
        b.init_params.append(("eps", "float"))
        b.init_inputs.append("eps")
    if b.rng.random() < 0.6:
        attr = b.fresh(("layer_norm", "ln", "norm"))
        b.init_lines.append(f"self.{attr} = nn.LayerNorm({heavy.pshape}{', eps=eps' if eps_arg else ''})")
        return ([f"{x} = self.{attr}({x})"], ["norm_weight", "norm_bias", "eps"],
                [f"self.{attr}.weight", f"self.{attr}.bias", f"self.{attr}.eps"])
    if eps_arg:
        b.init_lines.append("self.eps = eps")
    shape = b.pick([f"({x}.shape[-1],)", f"{x}.shape[-1:]"])
    eps_kw = ", eps=self.eps" if eps_arg else ""
    return [f"{x} = F.layer_norm({x}, {shape}{eps_kw})"], ["eps"], ["self.eps" if eps_arg else "1e-05"]


def render_gemm_softmax(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "gemm_softmax"
    x, heavy, b, pre, d = _setup(rng, style)
    what = rng.choice(ROW_NORMALIZERS)
    extra, extra_e = [], []
    if what == "layer_norm":
        ref_lines, extra, extra_e = _layer_norm(b, heavy, x)
        d = "-1"
    else:
        ref_lines = normalize_forms(b, what, d)
    b.fwd += ref_lines
    post = mark(b)
    draw_post(b, rng.choice((0, 1, 1, 2)), params=True)
    ops = b.ops[:pre.ops] + [f"{what}_lastdim"] + b.ops[pre.ops:]
    doc = doc_of(heavy, b.ops[:pre.ops], REDUCE_WORDS[what].format(d=_where(d) if what != "layer_norm" else
                                                                   "the features"), b.ops[pre.ops:])
    ref = reference_spec(heavy, b, doc, [f"return {x}"], "a tensor shaped like the GEMM's output.")
    style = avoid_clashes(style, sorted(b.taken))

    kname = style.kernel(f"{heavy.kind}_{what}")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    affine = "norm_weight" in extra
    ptrs += [style.ptr("norm_weight"), style.ptr("norm_bias")] if affine else []
    y_p, out_p = style.ptr("y"), style.ptr("out")
    form, flag = loop_form(style), style.pick_name(FLAGS, salt=5)
    stats, value = NORMALIZE[what]
    body = [f"y = {value.format(bc='')}"]
    if affine:
        body += load_params(style, ["norm_weight", "norm_bias"], "feat", "mask")
        body.append("y = y * norm_weight + norm_bias")
    body += load_params(style, b.loads[post.loads:], "feat", "mask") + b.body[post.body:]
    body.append(f"tl.store({out_p} + base + feat, {store_cast(style, 'y', out_p)}, mask=mask)")
    lines = ["row = tl.program_id(axis=0)", "base = row.to(tl.int64) * n_cols"]
    lines += _row_kernel(heavy, b, style, pre, form, flag, stats, lambda w: over_tiles(w, body), ref_lines)
    scal = ["eps"] if extra else []
    what_c = (f"one program per row; {_what(form, flag, stats)}, then one writing it, the chain recomputed each "
              f"time; {what} in float32")
    consts = [style.block] + ([flag] if form == "fits" else [])
    kernel = jit(kname, [y_p, out_p, *ptrs, "n_cols", *scal, *b.scalars], consts, style, what_c, lines)
    params, exprs = params + extra, exprs + extra_e
    launch = _launch(rng, style, kname, form, flag, "torch.empty_like(y)",
                     ["y", "out", *params[:len(params) - len(scal)], "n_cols", *scal, *b.scalars])
    if style.sizes == "published":
        ref.published = published_sizes(rng, heavy)
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                  f"the chain, the {what.replace('_', ' ')} and what follows it are",
                  f"fused GEMM epilogue with a row normaliser: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain})


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32
    return [TemplateInfo("gemm_reduce", render_gemm_reduce, ("float32",)),
            TemplateInfo("gemm_softmax", render_gemm_softmax, ("float32",))]
