"""Row-wise kernels for any row length: tiles of at most CAP elements walked in a loop.

KernelBench Level 1 publishes softmax, log-softmax, reductions, norms and scans over rows of 16K to
393K elements (batches of 16 to 4096 rows, inputs up to ~2**31 elements). A kernel that loads a row in
one tile (BLOCK = next_power_of_2(n_cols)) cannot compile there, so the row families render this form:
one program per row, `BLOCK = min(triton.next_power_of_2(n_cols), CAP)` and a loop over the row in
BLOCK-wide tiles. Statistics take one pass each, accumulated per lane in fp32 and reduced after the
loop (max, sum of exp(x - max), sum, mean, centred sum of squares, sum of squares), or the online
softmax's running max and rescaled sum in one pass; a last pass writes the normalised row. Scans carry
the prefix of the tiles before. Row offsets are 64-bit where rows * cols can pass 2**31.

The one-tile form (rowwise.py) stays for a minority of examples, only where the row the prompt shows
holds at most ONE_TILE_MAX elements. The verified (small) sizes of a looping example make its rows span
2-4 tiles at the kernel's own CAP, so the interpreter runs the loop, the carry and the last partial tile.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from . import scale

ONE_TILE_MAX = 4096  # the longest published row a one-tile kernel is rendered for
ONE_TILE_SHARE = 0.45  # of the examples whose row allows it, those rendering the one-tile form
CAPS = (512, 1024, 1024, 2048, 2048, 4096, 8192)  # a looping kernel's largest tile
NEAR_ONE_CAPS = (256, 512)  # products of near-one values: verified rows stay a few hundred long
REDUCE_CAPS = (1024, 2048, 4096)  # (outer, R, inner) reductions: BLOCK_R * BLOCK_I at most this
VERIFIED_MAX = 65536  # elements of a looping example's verified input

# published sizes of a looping kernel's prompt (KernelBench-like ranges; long rows dominate)
ROW_LONG = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 393216, 393216)
ROWS_LONG = (16, 64, 128, 256, 1024, 2048, 4096, 4096, 8192, 16384)
REDUCED_LONG = (1024, 4095, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 393216)  # an (outer, R, inner) R
OTHER_LONG = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)  # its other dims
PLANE_SIDES = (32, 64, 128, 256, 512)  # instance norm's H, W
NORM_BATCH = (8, 16, 32, 64, 112, 128)
LOOP_CAP = scale.MAX_ELEMENTS // 2  # the largest published input of a looping kernel (~2.1e9 elements)
PUBLISHED_MIN = 2**20  # ... and the smallest (a verified input holds at most VERIFIED_MAX)


def verified_row(rng: random.Random, tile: int) -> int:
    """A verified row spanning 2-4 tiles of `tile` elements, the last one partial."""
    return tile * rng.choice((1, 2, 3)) + rng.randrange(1, tile)


def fitting(rng: random.Random, choices: tuple[int, ...], budget: int) -> int:
    """A choice no larger than `budget` (the smallest if none is)."""
    ok = [c for c in choices if c <= budget]
    return rng.choice(ok) if ok else min(choices)


def published_rows(rng: random.Random, rank: int) -> list[int]:
    """Published sizes of a row family's input (its row last; instance norm's row is the last two): the
    row drawn first, then the rows' count, the input between PUBLISHED_MIN and LOOP_CAP elements."""
    if rank == 4:
        row = [rng.choice(PLANE_SIDES), rng.choice(PLANE_SIDES)]
        lead: tuple[tuple[int, ...], ...] = (NORM_BATCH, scale.CHANNELS)
    else:
        row = [rng.choice(ROW_LONG)]
        lead = (ROWS_LONG,) if rank == 2 else (scale.BATCH, scale.SEQ)
    return _around(rng, lead, math.prod(row)) + row


def published_reduce(rng: random.Random, reduced: int) -> list[int]:
    """Published sizes of a 3D input reduced over axis `reduced`: R first, then the others."""
    r = rng.choice(REDUCED_LONG)
    others = _around(rng, (OTHER_LONG, OTHER_LONG), r)
    return others[:reduced] + [r] + others[reduced:]


def _around(rng: random.Random, choices: tuple[tuple[int, ...], ...], row: int) -> list[int]:
    """Sizes from `choices` whose product times `row` lies between PUBLISHED_MIN and LOOP_CAP."""
    return scale.draw(rng, choices, fits=lambda d: math.prod(d) * row >= PUBLISHED_MIN, cap=LOOP_CAP // row)


def row_len(dims: list[int], rank: int) -> int:
    return dims[-2] * dims[-1] if rank == 4 else dims[-1]


def verified_dims(rng: random.Random, rank: int, n: int) -> list[int]:
    """The verified sizes of a looping row example whose row holds `n` elements."""
    budget = max(1, VERIFIED_MAX // n)
    if rank == 2:
        return [fitting(rng, (2, 3, 4, 8), budget), n]
    lead = fitting(rng, (2, 3), budget // 2)  # the next dim is at least 2
    return [lead, fitting(rng, (2, 3, 4), budget // lead), n]


def verified_plane(rng: random.Random, n: int) -> tuple[int, int]:
    """H, W of a verified plane of at least `n` elements (two tiles or more)."""
    h = rng.choice((24, 33, 40, 48))
    return h, -(-n // h)


# --------------------------------------------------------------------------- kernel text


@dataclass
class Loop:
    """The names a looping row kernel uses."""

    x: str  # the loaded tile
    out: str  # the result tile
    n: str  # the row length
    mask: str
    cols: str  # a tile's column indices
    block: str
    xp: str  # input pointer
    op: str  # output pointer
    rp: str = ""  # the residual's pointer ("" none)
    weights: tuple[str, ...] = ()  # per-column parameters (kernel arg names; their pointers are ptr(w))
    ptr: tuple[str, ...] = ()  # the weights' pointers
    reverse: bool = False  # walk the row back to front (a reverse scan)
    phrasing: int = 0  # the loop header's form

    @property
    def idx(self) -> str:
        return f"({self.n} - 1 - {self.cols})" if self.reverse else self.cols


def loop_header(lp: Loop) -> list[str]:
    """The loop over the row's tiles and the tile's columns and mask (three phrasings)."""
    form = lp.phrasing % 3
    if form == 2:
        head = [f"for tile in range(0, tl.cdiv({lp.n}, {lp.block})):",
                f"    {lp.cols} = tile * {lp.block} + tl.arange(0, {lp.block})"]
    else:
        var = "start" if form == 0 else "off"
        head = [f"for {var} in range(0, {lp.n}, {lp.block}):", f"    {lp.cols} = {var} + tl.arange(0, {lp.block})"]
    return head + [f"    {lp.mask} = {lp.cols} < {lp.n}"]


def load_tile(lp: Loop, fill: str) -> list[str]:
    """The tile's input (the residual added), in fp32; masked lanes read `fill`."""
    out = [f"{lp.x} = tl.load({lp.xp} + row_start + {lp.idx}, mask={lp.mask}, other={fill}).to(tl.float32)"]
    if lp.rp:
        out.append(f"{lp.x} += tl.load({lp.rp} + row_start + {lp.cols}, mask={lp.mask}, other=0.0).to(tl.float32)")
    return out


def over_tiles(lp: Loop, fill: str, body: list[str]) -> list[str]:
    return loop_header(lp) + [f"    {ln}" for ln in load_tile(lp, fill) + body]


NEG_INF, POS_INF = 'float("-inf")', 'float("inf")'


def stat_passes(lp: Loop, stats: str, variant: int) -> list[str]:
    """The statistics of a row, one loop each (or one loop for the online softmax / a one-pass mean
    and variance): `row_max`, `denom`, `total`, `mean`, `var`, `ss`."""
    zeros = f"tl.zeros([{lp.block}], dtype=tl.float32)"
    x, m = lp.x, lp.mask
    if stats == "max_sumexp" and variant % 2 == 0:  # online: running max, the sum rescaled when it grows
        rescaled = f"denom = denom * tl.exp(row_max - new_max) + tl.sum(tl.exp({x} - new_max), axis=0)"
        return ([f"row_max = {NEG_INF}", "denom = 0.0"]
                + over_tiles(lp, NEG_INF, [f"new_max = tl.maximum(row_max, tl.max({x}, axis=0))", rescaled,
                                           "row_max = new_max"]))
    if stats in ("max", "max_sumexp"):
        out = [f"acc = tl.full([{lp.block}], {NEG_INF}, dtype=tl.float32)"]
        out += over_tiles(lp, NEG_INF, [f"acc = tl.maximum(acc, {x})"]) + ["row_max = tl.max(acc, axis=0)"]
        if stats == "max_sumexp":
            out += [f"acc = {zeros}"] + over_tiles(lp, NEG_INF, [f"acc += tl.exp({x} - row_max)"])
            out.append("denom = tl.sum(acc, axis=0)")
        return out
    if stats == "sum":
        return [f"acc = {zeros}"] + over_tiles(lp, "0.0", [f"acc += {x}"]) + ["total = tl.sum(acc, axis=0)"]
    if stats == "sumsq":
        return [f"acc = {zeros}"] + over_tiles(lp, "0.0", [f"acc += {x} * {x}"]) + ["ss = tl.sum(acc, axis=0)"]
    if stats == "mean_var" and variant % 3 == 2:  # one pass: sum and sum of squares
        return ([f"acc = {zeros}", f"acc_sq = {zeros}"]
                + over_tiles(lp, "0.0", [f"acc += {x}", f"acc_sq += {x} * {x}"])
                + [f"mean = tl.sum(acc, axis=0) / {lp.n}",
                   f"var = tl.maximum(tl.sum(acc_sq, axis=0) / {lp.n} - mean * mean, 0.0)"])
    if stats == "mean_var":  # two passes: the mean, then the centred sum of squares
        return ([f"acc = {zeros}"] + over_tiles(lp, "0.0", [f"acc += {x}"])
                + [f"mean = tl.sum(acc, axis=0) / {lp.n}", f"acc = {zeros}"]
                + over_tiles(lp, "0.0", [f"diff = tl.where({m}, {x} - mean, 0.0)", "acc += diff * diff"])
                + [f"var = tl.sum(acc, axis=0) / {lp.n}"])
    raise KeyError(stats)


def _gelu(v: str) -> str:
    return f"0.5 * {v} * (1.0 + tl.erf({v} * 0.7071067811865476))"


# family -> (statistics, lines after them, per-tile value of a row output or the reduced value)
ROW_LOOPS: dict[str, tuple[str, list[str], list[str]]] = {
    "softmax": ("max_sumexp", [], ["{out} = tl.exp({x} - row_max) / denom"]),
    "log_softmax": ("max_sumexp", ["log_denom = tl.log(denom)"], ["{out} = {x} - row_max - log_denom"]),
    "softmax_scale": ("max_sumexp", [], ["{out} = tl.exp({x} - row_max) / denom * scale"]),
    "max_subtract_exp": ("max", [], ["{out} = tl.exp({x} - row_max)"]),
    "layer_norm": ("mean_var", ["rstd = 1.0 / tl.sqrt(var + eps)"], ["{out} = ({x} - mean) * rstd * w + b"]),
    "layer_norm_residual": ("mean_var", ["rstd = 1.0 / tl.sqrt(var + eps)"],
                            ["{out} = ({x} - mean) * rstd * w + b"]),
    "layer_norm_gelu": ("mean_var", ["rstd = 1.0 / tl.sqrt(var + eps)"],
                        ["{out} = ({x} - mean) * rstd * w + b", "{out} = " + _gelu("{out}")]),
    "instance_norm": ("mean_var", ["rstd = 1.0 / tl.sqrt(var + eps)"], ["{out} = ({x} - mean) * rstd"]),
    "rms_norm": ("sumsq", ["rstd = 1.0 / tl.sqrt(ss / {n} + eps)"], ["{out} = {x} * rstd * w"]),
    "rms_norm_silu": ("sumsq", ["rstd = 1.0 / tl.sqrt(ss / {n} + eps)"],
                      ["{out} = {x} * rstd * w", "{out} = {out} * tl.sigmoid({out})"]),
    "l2_normalize": ("sumsq", ["norm = tl.maximum(tl.sqrt(ss), 1e-12)"], ["{out} = {x} / norm"]),
    "l2_normalize_scale": ("sumsq", ["norm = tl.maximum(tl.sqrt(ss), 1e-12)"], ["{out} = {x} / norm * scale"]),
    # reductions to one value per row
    "logsumexp_relu": ("max_sumexp", [], ["{out} = tl.maximum(row_max + tl.log(denom), 0.0)"]),
    "sum_div": ("sum", [], ["{out} = total / divisor"]),
    "mean_square_sqrt": ("sumsq", [], ["{out} = tl.sqrt(ss / {n})"]),
}
SCANS = ("cumsum", "cumprod", "reverse_cumsum", "exclusive_cumsum")


def scan_lines(family: str, lp: Loop, variant: int) -> list[str]:
    """A scan over the row's tiles: each tile's own scan, plus the carry of the tiles before it."""
    prod = family == "cumprod"
    x, out = lp.x, lp.out
    if prod:
        body = [f"{out} = tl.cumprod({x}, axis=0) * carry",
                f"tl.store({lp.op} + row_start + {lp.idx}, {out}, mask={lp.mask})",
                f"carry = carry * tl.reduce({x}, 0, _mul_combine)"]
    else:
        scan = f"tl.cumsum({x}, axis=0)" + (f" - {x}" if family == "exclusive_cumsum" else "")
        carry = f"carry += tl.sum({x}, axis=0)" if variant % 2 == 0 else f"carry = carry + tl.sum({x}, axis=0)"
        body = [f"{out} = {scan} + carry", f"tl.store({lp.op} + row_start + {lp.idx}, {out}, mask={lp.mask})", carry]
    return ["carry = 1.0" if prod else "carry = 0.0"] + over_tiles(lp, "1.0" if prod else "0.0", body)


def row_loop_body(family: str, output: str, lp: Loop, variant: int) -> list[str]:
    """The kernel lines after `row_start` of a looping row kernel of `family`."""
    if family in SCANS:
        return scan_lines(family, lp, variant)
    stats, after, value = ROW_LOOPS[family]
    fmt = {"out": lp.out, "x": lp.x, "n": lp.n}
    lines = stat_passes(lp, stats, variant) + [ln.format(**fmt) for ln in after]
    value = [ln.format(**fmt) for ln in value]
    if output != "row":  # one value per row: no last pass
        return lines + value
    loads = [f"{w} = tl.load({p} + {lp.cols}, mask={lp.mask}, other=0.0).to(tl.float32)"
             for w, p in zip(lp.weights, lp.ptr)]
    store = f"tl.store({lp.op} + row_start + {lp.idx}, {lp.out}, mask={lp.mask})"
    return lines + over_tiles(lp, "0.0", loads + value + [store])
