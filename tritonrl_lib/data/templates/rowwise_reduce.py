"""Row-wise templates beyond one program per row, and what every row-wise template shares.

Reductions over a constructor-chosen dim of a 3D input view it as (outer, R, inner) and reduce
[BLOCK_R, BLOCK_I] tiles in place (no data movement); SwiGLU reads both halves of a row in one flat
pass. The size names, input names and the `Ctx` of an example live here for rowwise.py too.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from . import rowwise_loop as loop
from . import scale
from .base import Example, RefSpec, SolSpec, Style, avoid_clashes, comment, grid_1d, make_example, rand, randn

SIZES_2D = [("batch_size", "dim"), ("N", "D"), ("rows", "cols"), ("batch_size", "features"), ("batch", "hidden"),
            ("batch_size", "hidden_size"), ("M", "N"), ("batch_size", "num_features"), ("n_rows", "n_cols"),
            ("batch_size", "dim")]
SIZES_3D = [("batch_size", "dim1", "dim2"), ("B", "M", "N"), ("batch", "seq_len", "hidden"),
            ("batch_size", "seq_len", "d_model"), ("N", "L", "C"),
            ("batch_size", "channels", "length")]
SIZES_4D = [("batch_size", "channels", "height", "width"), ("N", "C", "H", "W"), ("batch", "features", "h", "w"),
            ("batch_size", "num_features", "dim1", "dim2"), ("B", "C", "H", "W")]
X_NAMES = ("x", "x", "inp", "input_tensor", "t", "input", "X", "x", "hidden_states", "inputs")


@dataclass
class Ctx:
    """The names and choices of one example, handed to a family's callables."""

    x: str  # the input tensor (and, inside the kernel, its loaded row)
    out: str  # the result inside the kernel
    n_cols: str
    mask: str
    cols: str
    sizes: tuple[str, ...]
    dim: str  # expression of the operated dim in the reference ("-1", "self.dim", ...)
    attr: str  # the attribute name of a norm submodule / parameter owner
    style: Style
    residual: str = "residual"
    params: dict = field(default_factory=dict)  # chosen scalar values


def _input(kind: str, shape: list[str], dtype: str) -> str:
    if kind == "near_one":
        return rand(shape, dtype, " * 0.5 + 0.75")
    return randn(shape, dtype)


# ---------------------------------------------------------------------------- SwiGLU (a split row)


def render_swiglu(rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name(SIZES_2D)
    x = style.pick_name(X_NAMES, salt=1)
    style = avoid_clashes(style, [*sizes, x])
    dims = [rng.choice((2, 4, 8, 16)), rng.choice((16, 32, 50, 64, 128))]
    hidden = sizes[-1]
    if style.sizes == "published":  # a flat pass: rows and the half-row both scale
        pub = dict(zip(sizes, scale.draw(rng, (scale.ROWS, (1024, 2048, 4096, 8192, 11008, 16384)),
                                         cap=scale.MAX_ELEMENTS // 2)))
        style = scale.with_offsets(style, 2 * pub[sizes[0]] * pub[hidden])
    forms = [[f"a, b = {x}.chunk(2, dim=-1)", "return F.silu(a) * b"],
             [f"gate, up = torch.chunk({x}, 2, dim=-1)", "return gate * torch.sigmoid(gate) * up"]]
    fwd = style.pick(forms)
    ref = RefSpec(doc="SwiGLU: splits the last dimension in two halves a, b and returns silu(a) * b.",
                  init_params=[], init_lines=[], forward_args=[x], forward_lines=fwd,
                  constants=list(zip(sizes, dims)), inputs=[(x, randn([sizes[0], f"2 * {hidden}"], dtype))],
                  init_inputs=[], forward_doc="a tensor whose last dimension is half the input's.",
                  imports=["import torch.nn.functional as F"] if "F." in fwd[-1] else [],
                  published=pub if style.sizes == "published" else {})
    kname = style.kernel("swiglu")
    b, o, m, n = style.block, style.offs, style.mask, style.numel
    xp, op = style.ptr(x), style.ptr("out")
    offsets = "\n".join(f"    {ln}" for ln in scale.block_offsets(style, style.pid, b, o))
    kernel = f"""
@triton.jit
def {kname}({xp}, {op}, {n}, half, {b}: tl.constexpr):
{comment(style, "out[r, j] = silu(x[r, j]) * x[r, half + j]: both halves come from the same input row")}    {style.pid} = tl.program_id(axis=0)
{offsets}
    {m} = {o} < {n}
    row = {o} // half
    col = {o} % half
    a = tl.load({xp} + row * 2 * half + col, mask={m}, other=0.0).to(tl.float32)
    g = tl.load({xp} + row * 2 * half + half + col, mask={m}, other=0.0).to(tl.float32)
    tl.store({op} + {o}, a * tl.sigmoid(a) * g, mask={m})
"""
    launch = [f"{x} = {x}.contiguous()", "half = " + f"{x}.shape[-1] // 2",
              f"out = torch.empty({x}.shape[:-1] + (half,), dtype={x}.dtype, device={x}.device)",
              f"{n} = out.numel()", f"grid = {grid_1d(style, n)}",
              f"{kname}[grid]({x}, out, {n}, half, {b}={style.block_size})", "return out"]
    if style.launcher == "function":
        fn = "swiglu" if kname != "swiglu" else "launch_swiglu"
        helpers = [f"def {fn}({x}):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n"]
        forward = [f"return {fn}({x})"]
    else:
        helpers, forward = [], launch
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example("swiglu", ref, sol, style, "SwiGLU gate: split, SiLU and multiply, fused", dtype,
                        dict(zip(sizes, dims)))


# ---------------------------------------------------------------------------- reductions over any dim


# the looping form: family -> (how tiles combine, each element's term, the value stored from `acc`)
REDUCE_LOOPS = {"sum_dim": ("sum", "{x}", "acc"), "mean_dim": ("sum", "{x}", "acc / reduce_len"),
                "norm_dim": ("sum", "{x} * {x}", "tl.sqrt(acc)"), "max_dim": ("max", "{x}", "acc"),
                "min_dim": ("min", "{x}", "acc"), "prod_dim": ("prod", "{x}", "acc")}
_ACC_INIT = {"sum": "tl.zeros({shape}, dtype=tl.float32)", "max": 'tl.full({shape}, float("-inf"), dtype=tl.float32)',
             "min": 'tl.full({shape}, float("inf"), dtype=tl.float32)', "prod": "tl.full({shape}, 1.0, dtype=tl.float32)"}
_TILE_REDUCE = {"sum": "tl.sum({v}, axis=0)", "max": "tl.max({v}, axis=0)", "min": "tl.min({v}, axis=0)",
                "prod": "tl.reduce({v}, 0, _mul_combine)"}
_COMBINE = {"sum": "acc += {v}", "max": "acc = tl.maximum(acc, {v})", "min": "acc = tl.minimum(acc, {v})",
            "prod": "acc = acc * {v}"}


def _reduce_loop(family: str, x: str, out: str, per_tile: bool) -> tuple[list[str], list[str], list[str]]:
    """(before the loop, in it after the tile's load, after it) of the looping reduction: accumulators of
    BLOCK_I values reduced tile by tile (`per_tile`) or of the whole [BLOCK_R, BLOCK_I] tile reduced once
    after the loop; argmax / argmin keep the best value and its index (strictly better only: the first
    index wins ties, as in torch)."""
    if family in ("argmax_dim", "argmin_dim"):
        big = family == "argmax_dim"
        fn, cmp = ("max", ">") if big else ("min", "<")
        return ([f"best = {_ACC_INIT[fn].format(shape='[BLOCK_I]')}", "best_idx = tl.zeros([BLOCK_I], dtype=tl.int32)"],
                [f"tile_best = tl.{fn}({x}, axis=0)", f"tile_idx = tl.arg{fn}({x}, axis=0) + start",
                 f"better = tile_best {cmp} best", "best_idx = tl.where(better, tile_idx, best_idx)",
                 "best = tl.where(better, tile_best, best)"],
                [f"{out} = best_idx"])
    how, term, value = REDUCE_LOOPS[family]
    term = term.format(x=x)
    if per_tile:
        return ([f"acc = {_ACC_INIT[how].format(shape='[BLOCK_I]')}"],
                [_COMBINE[how].format(v=_TILE_REDUCE[how].format(v=term))], [f"{out} = {value}"])
    return ([f"acc = {_ACC_INIT[how].format(shape='[BLOCK_R, BLOCK_I]')}"], [_COMBINE[how].format(v=term)],
            [f"acc = {_TILE_REDUCE[how].format(v='acc')}", f"{out} = {value}"])


def _verified_reduce(rng: random.Random, reduced: int, near_one: bool) -> tuple[list[int], int, int]:
    """(sizes, cap, BLOCK_I's cap) of a looping reduction whose verified R spans 2-4 of its BLOCK_R tiles,
    the input within VERIFIED_MAX elements (the smallest other dims if no draw fits)."""
    for attempt in range(41):
        cap = rng.choice(loop.NEAR_ONE_CAPS if near_one else loop.REDUCE_CAPS)
        ic = rng.choice((16, 32, 64))
        dims = [rng.choice((2, 3, 4)), rng.choice((3, 5, 8, 16)), rng.choice((3, 8, 16, 33))]
        if attempt == 40:
            cap, ic, dims = min(loop.NEAR_ONE_CAPS if near_one else loop.REDUCE_CAPS), 64, [2, 3, 3]
        inner = math.prod(dims[reduced + 1:])
        dims[reduced] = loop.verified_row(rng, max(1, cap // min(_next_pow2(inner), ic)))
        if math.prod(dims) <= loop.VERIFIED_MAX or attempt == 40:
            return dims, cap, ic
    raise AssertionError("unreachable")


def _next_pow2(n: int) -> int:
    """triton.next_power_of_2, without importing triton here."""
    return 1 << (n - 1).bit_length()


def render_reduce(fam, rng: random.Random, dtype: str, style: Style) -> Example:  # fam: a rowwise.RowFamily
    """A reduction over constructor-chosen dim of a 3D input, without moving data: the input is
    viewed as (outer, R, inner) and each program reduces BLOCK_I neighbouring inner positions (contiguous
    in memory) over R: in BLOCK_R-long tiles of at most CAP elements in all (the looping form), or, for a
    minority whose shown R is at most 1024, in one tile holding R whole. A flat grid: outer * inner blocks
    may pass CUDA's 65,535 limit on a grid's second dimension."""
    sizes = style.pick_name(SIZES_3D)
    x = style.pick_name(X_NAMES, salt=1)
    style = avoid_clashes(style, [*sizes, x])
    dim_name = style.pick_name(("dim", "reduce_dim", "axis", "dim"), salt=2)
    dim_value = rng.choice((1, 2, -1, 0, 1))
    reduced = dim_value % 3
    pub = loop.published_reduce(rng, reduced) if style.sizes == "published" else None
    one_tile_ok = pub is None or (fam.max_cols >= 64 and pub[reduced] <= 1024)
    looping = not one_tile_ok or rng.random() >= loop.ONE_TILE_SHARE
    if looping:
        dims, cap, ic = _verified_reduce(rng, reduced, fam.input_kind == "near_one")
    else:
        dims = [rng.choice((2, 4)), rng.choice((3, 8, 16)), rng.choice(tuple(d for d in (16, 33, 64) if d <= fam.max_cols))]
        cap, ic = rng.choice((2048, 4096)), rng.choice((16, 32, 64))
    keepdim = style.variant % 4 == 3 and fam.family not in ("argmax_dim", "argmin_dim")
    constants = list(zip(sizes, dims)) + [(dim_name, dim_value)]
    c = Ctx(x=x, out=style.pick(("out", "acc", "result", "out"), salt=4), n_cols="reduce_len", mask=style.mask,
            cols="offs_r", sizes=sizes, dim=f"self.{dim_name}", attr="", style=style)
    fwd = style.pick(fam.forms)(c)
    if keepdim:
        fwd = [ln.replace(f"dim={c.dim})", f"dim={c.dim}, keepdim=True)") for ln in fwd]
        if not any("keepdim" in ln for ln in fwd):
            keepdim = False
    ref = RefSpec(doc=fam.doc + (" The reduced dimension is kept with size 1." if keepdim else ""),
                  init_params=[(dim_name, "int")], init_lines=[f"self.{dim_name} = {dim_name}"], forward_args=[x],
                  forward_lines=fwd, constants=constants, inputs=[(x, _input(fam.input_kind, list(sizes), dtype))],
                  init_inputs=[dim_name], forward_doc="the input reduced over `dim`.",
                  arg_docs={dim_name: "The dimension to reduce over."})
    if pub is not None:  # KernelBench-like: the reduced dim up to 262,144 long; 64-bit offsets past 2**31
        ref.published = dict(zip(sizes, pub))
        style = scale.with_offsets(style, math.prod(pub))
    kname = style.kernel(fam.family)
    xp, op, m = style.ptr(x), style.ptr("out"), style.mask
    wide = ".to(tl.int64)" if style.int64 else ""
    body = ["pid = tl.program_id(0)", "pid_o = pid // n_inner_blocks", "pid_i = pid % n_inner_blocks",
            "offs_r = tl.arange(0, BLOCK_R)", "offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)",
            "i_mask = offs_i < inner", f"base = pid_o{wide} * reduce_len * inner"]
    if looping:
        out = "result" if c.out == "acc" else c.out
        before, step, after = _reduce_loop(fam.family, x, out, per_tile=style.variant % 3 != 1)
        body += before + ["for start in range(0, reduce_len, BLOCK_R):", "    r = start + offs_r",
                          f"    {m} = (r[:, None] < reduce_len) & i_mask[None, :]",
                          f"    {x} = tl.load({xp} + base + r[:, None]{wide} * inner + offs_i[None, :], mask={m},",
                          f"                  {' ' * len(x)}other={fam.other}).to(tl.float32)"]
        body += [f"    {ln}" for ln in step] + after
        note = "x is seen as (outer, reduce_len, inner); each program walks reduce_len in BLOCK_R-long tiles"
    else:
        out = c.out
        body += [f"{m} = (offs_r[:, None] < reduce_len) & i_mask[None, :]",
                 f"{x} = tl.load({xp} + base + offs_r[:, None] * inner + offs_i[None, :],",
                 f"            mask={m}, other={fam.other}).to(tl.float32)"]
        body += style.pick(fam.compute, salt=6)(c)
        note = "x is seen as (outer, reduce_len, inner); one tile holds reduce_len whole (at most 1024 long)"
    body.append(f"tl.store({op} + pid_o * inner + offs_i, {out}, mask=i_mask)")
    kernel = (f"@triton.jit\ndef {kname}({xp}, {op}, reduce_len, inner, n_inner_blocks, BLOCK_R: tl.constexpr, "
              "BLOCK_I: tl.constexpr):\n" + comment(style, note) + "\n".join(f"    {ln}" for ln in body) + "\n")
    dtype_expr = fam.out_dtype or f"{x}.dtype"
    blocks = ([f"BLOCK_I = min(triton.next_power_of_2(inner), {ic})",
               f"BLOCK_R = min(triton.next_power_of_2(reduce_len), {cap} // BLOCK_I)"] if looping else
              ["BLOCK_R = triton.next_power_of_2(reduce_len)",
               f"BLOCK_I = min(triton.next_power_of_2(inner), {ic}, max(1, {cap} // BLOCK_R))"])
    launch = [f"dim = dim % {x}.dim()", f"{x} = {x}.contiguous()",
              f"reduce_len = {x}.shape[dim]", "outer = 1", f"for size in {x}.shape[:dim]:", "    outer *= size",
              f"inner = {x}.numel() // (outer * reduce_len)",
              f"out = torch.empty({x}.shape[:dim] + {x}.shape[dim + 1:], dtype={dtype_expr}, device={x}.device)",
              *blocks, "n_inner_blocks = triton.cdiv(inner, BLOCK_I)", "grid = (outer * n_inner_blocks,)",
              f"{kname}[grid]({x}, out, reduce_len, inner, n_inner_blocks, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)",
              "return out.unsqueeze(dim)" if keepdim else "return out"]
    fn = style.pick_name(("{}", "triton_{}", "{}_forward", "launch_{}"), salt=3).format(fam.family)
    if fn == kname:
        fn = f"launch_{fam.family}"
    doc = '    """Reduces x over `dim` with one program per (outer index, block of inner positions)."""\n' \
        if style.sol_docstrings else ""
    helper = f"def {fn}({x}, dim):\n" + doc + "\n".join(f"    {ln}" for ln in launch) + "\n"
    sol = SolSpec(kernels=[*fam.helpers, kernel], helpers=[helper],
                  forward_lines=[f"return {fn}({x}, self.{dim_name})"])
    shape = dict(zip(sizes, dims)) | {dim_name: dim_value, "keepdim": int(keepdim)}
    return make_example(fam.family, ref, sol, style, fam.doc, dtype, shape)
