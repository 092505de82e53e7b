"""Level-2 convolution epilogues that reduce: a convolution (1D / 2D / 3D, or transposed 2D / 3D; stride,
padding and output_padding passed to the constructor KernelBench's way) kept in PyTorch, a chain of 0-3
cheap ops (epilogue.py's), then

- `conv_channel_reduce`: a reduction over the channels, `dim=1` (sum, mean, max, min, logsumexp, L2 norm;
  keepdim or not) followed by 0-2 ops on the reduced map, or a normaliser over the channels (softmax,
  log-softmax, the channel mean or maximum subtracted) followed by 0-2 ops, per-channel parameters
  among them;
- `conv_global_pool`: a reduction over the spatial dims (global average / max pooling, a sum; as
  `torch.mean(x, dim=[2, 3], keepdim=True)`, `F.adaptive_avg_pool2d(x, 1)`, `nn.AdaptiveMaxPool2d`,
  `x.flatten(2).mean(-1)`, ...), 0-2 ops on the pooled (N, C) values, per-channel parameters among
  them, and sometimes a last reduction over the channels (sum, mean, max, logsumexp) and one more op.

Over the channels a program owns BLOCK_S spatial positions of one sample (positions on the grid's first
axis, which has no 65535 limit) and walks the channels in [BLOCK_C, BLOCK_S] tiles (channel stride: the
spatial size). Global pooling gives a program one sample and BLOCK_C channels and walks the spatial
extent in [BLOCK_C, BLOCK_S] tiles; when the channels are reduced after the pooling, one program per
sample walks the channels in BLOCK_C blocks, pools each, and keeps the reduction over the channels in
BLOCK_C lanes across them (a running maximum and rescaled sum for logsumexp). Every tile is bounded
(at most 8192 elements), whatever the sizes: the loop forms of reduce_common.py.
"""

from __future__ import annotations

import random

from .base import Example, Style, TemplateInfo, avoid_clashes
from .epilogue import Build, kernel_inputs, reference_spec, trace
from .reduce_common import (FLAGS, NORMALIZE, REDUCE, REDUCE_WORDS, TILE_CAP, TILE_DIM_CAP, Walk,
                            doc_of, draw_post, finish, fits_branch, fits_launch, grid_line, indent, jit, load_params,
                            loop_form, mark, normalize_forms, over_tiles, pre_loads, published_sizes, reduce_forms,
                            start, stat_lines, store_cast, words)

HEAVY_KINDS = ("conv1d", "conv2d", "conv2d", "conv2d", "conv3d", "convt2d", "convt2d", "convt3d")
CHANNEL_OPS = ("sum", "mean", "max", "min", "min", "logsumexp", "norm", "softmax", "softmax", "log_softmax",
               "center", "max_sub")
POOLS = ("mean", "mean", "mean", "max", "max", "sum")
FINAL = ("sum", "mean", "max", "logsumexp", "logsumexp")
BLOCK_NAMES = (("BLOCK_C", "BLOCK_S"), ("BLOCK_R", "BLOCK_I"), ("BLOCK_CH", "BLOCK_HW"))
# tiles [channels, positions] of at most 8192 elements; "fits": (channels in one tile up to, positions' cap)
CHANNEL_CAPS, POSITION_CAPS, CHANNEL_FITS = (4, 8, 16, 32), (64, 128, 256), ((64, (32, 64, 128)), (128, (16, 32, 64)))
# pooling: [channels, positions]; "fits": (positions in one tile up to, channels' cap)
POOL_CHANNEL_CAPS, POOL_POSITION_CAPS, POOL_FITS = (4, 8, 16), (64, 128, 256, 512), ((1024, (4, 8)), (2048, (4,)))
assert max(CHANNEL_CAPS) * max(POSITION_CAPS) <= TILE_CAP and max(POOL_CHANNEL_CAPS) * max(POOL_POSITION_CAPS) <= TILE_CAP
assert all(limit * max(caps) <= TILE_CAP and limit <= TILE_DIM_CAP for limit, caps in CHANNEL_FITS + POOL_FITS)


def _launch_head(rng: random.Random) -> list[str]:
    return ["y = y.contiguous()", "batch, channels = y.shape[0], y.shape[1]",
            rng.choice(["spatial = y.numel() // (batch * channels)", "spatial = y[0, 0].numel()"])]


# --------------------------------------------------------------------------- over the channels


def render_conv_channel_reduce(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "conv_channel_reduce"
    x, heavy, b, pre = start(rng, style, HEAVY_KINDS)
    what = rng.choice(CHANNEL_OPS)
    reduces = what in REDUCE
    keepdim = reduces and rng.random() < 0.5
    if reduces:
        expr = rng.choice(reduce_forms(what, x, "1", keepdim))
        ref_lines = [f"{x} = {expr}"]
    else:
        ref_lines = normalize_forms(b, what, "1")
    n_post = rng.choice((0, 1, 1, 2))
    if n_post or not reduces:
        b.fwd += ref_lines
    post = mark(b)
    b.pshape = heavy.pshape
    draw_post(b, n_post, params=not reduces)
    if n_post or not reduces:
        tail = [f"return {x}"]
    else:
        tail = rng.choice([[f"return {expr}"], [f"{x} = {expr}", f"return {x}"]])
    ops = b.ops[:pre.ops] + [f"{what}_dim1"] + b.ops[pre.ops:]
    doc = doc_of(heavy, b.ops[:pre.ops], REDUCE_WORDS[what].format(d="the channels"), b.ops[pre.ops:])
    fdoc = ("the map reduced over the channels" + (" (kept with size 1)." if keepdim else ".") if reduces else
            "a tensor shaped like the convolution's output.")
    ref = reference_spec(heavy, b, doc, tail, fdoc)
    style = avoid_clashes(style, sorted(b.taken))

    kname = style.kernel(f"{heavy.kind}_{what}_channels")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    y_p, out_p = style.ptr("y"), style.ptr("out")
    bc_, bs = style.pick(BLOCK_NAMES, salt=7)
    form, flag = loop_form(style), style.pick_name(FLAGS, salt=5)

    def walk(single: bool) -> Walk:
        tile = [f"ch = {'' if single else 'start + '}tl.arange(0, {bc_})[:, None]", "ch_mask = ch < channels",
                "mask = ch_mask & col_mask[None, :]",
                (f"y = tl.load({y_p} + base + ch.to(tl.int64) * spatial + cols[None, :], mask=mask, other=0.0)"
                 ".to(tl.float32)")]
        tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch", "ch_mask") + b.body[:pre.body] + trace(traced)
        return Walk(None if single else f"for start in range(0, channels, {bc_}):", tile, "ch_mask",
                    f"({bc_}, {bs})", 0, "[None, :]", "channels", rshape=f"({bs},)")

    def part(w: Walk, online: bool) -> list[str]:
        """The statistics over the channels, then the rest (a reduction's value; a normaliser's tiles)."""
        lines = (w.pass_tile() if w.single else []) + stat_lines(w, stats, online)
        if reduces:
            return lines
        body = [f"y = {value.format(bc='[None, :]')}"] + load_params(style, b.loads[post.loads:], "ch", "ch_mask")
        body += b.body[post.body:]
        body.append(f"tl.store({out_p} + base + ch.to(tl.int64) * spatial + cols[None, :], "
                    f"{store_cast(style, 'y', out_p)}, mask=mask)")
        return lines + over_tiles(w, body)

    stats, value = REDUCE[what] if reduces else NORMALIZE[what]
    traced = ref_lines if n_post or not reduces else tail[:1]  # the reduction's reference line
    lines = ["row = tl.program_id(axis=1)", f"cols = tl.program_id(axis=0) * {bs} + tl.arange(0, {bs})",
             "col_mask = cols < spatial", "base = row.to(tl.int64) * channels * spatial"]
    tiles = part(walk(False), form == "online")
    lines += fits_branch(flag, part(walk(True), False), tiles) if form == "fits" else tiles
    if reduces:
        lines += [f"y = {value}"] + b.body[post.body:]
        lines.append(f"tl.store({out_p} + row.to(tl.int64) * spatial + cols, {store_cast(style, 'y', out_p)}, "
                     "mask=col_mask)")
    how = {"fits": f"every channel in one tile where {flag} (few channels), else a pass over [{bc_}, {bs}] "
                   "channel tiles per statistic",
           "passes": f"a pass over [{bc_}, {bs}] channel tiles per statistic",
           "online": f"one pass over [{bc_}, {bs}] channel tiles" + (" (running maximum and rescaled sum)"
                                                                    if len(stats) > 1 else "")}[form]
    what_c = f"a program: {bs} spatial positions of one sample; {how}; the {what} over the channels in float32"
    consts = [bc_, bs] + ([flag] if form == "fits" else [])
    kernel = jit(kname, [y_p, out_p, *ptrs, "channels", "spatial", *b.scalars], consts, style, what_c, lines)
    out = ("torch.empty((batch, 1, *y.shape[2:]), device=y.device, dtype=y.dtype)" if keepdim else
           "torch.empty((batch, *y.shape[2:]), device=y.device, dtype=y.dtype)" if reduces else "torch.empty_like(y)")
    if form == "fits":
        limit, pos_caps = rng.choice(CHANNEL_FITS)
        sizing = fits_launch(rng, flag, bc_, "channels", limit, rng.choice(CHANNEL_CAPS))
        sizing.append(f"{bs} = min(triton.next_power_of_2(spatial), {rng.choice(pos_caps)})")
    else:
        sizing = [f"{bc_} = min(triton.next_power_of_2(channels), {rng.choice(CHANNEL_CAPS)})",
                  f"{bs} = min(triton.next_power_of_2(spatial), {rng.choice(POSITION_CAPS)})"]
    call = ", ".join(["y", "out", *params, "channels", "spatial", *b.scalars])
    launch = _launch_head(rng) + [f"out = {out}", *sizing, grid_line(style, f"triton.cdiv(spatial, {bs}), batch"),
                                  f"{kname}[grid]({call}, {', '.join(f'{c}={c}' for c in consts)})", "return out"]
    if style.sizes == "published":
        ref.published = published_sizes(rng, heavy)
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                  f"the chain, the {what.replace('_', ' ')} over the channels and what follows it are",
                  f"fused convolution epilogue over the channels: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain, "keepdim": int(keepdim)})


# --------------------------------------------------------------------------- over the spatial dims


def _pool_forms(b: Build, what: str, v: str, nd: int, keepdim: bool) -> str:
    dims = list(range(2, 2 + nd))
    tup = tuple(dims)
    kd = ", keepdim=True" if keepdim else ""
    one = b.pick(["1", repr((1,) * nd)])
    if what == "mean":
        forms = [f"torch.mean({v}, dim={dims}{kd})", f"{v}.mean(dim={tup!r}{kd})"]
        forms += [f"F.adaptive_avg_pool{nd}d({v}, {one})", "module"] if keepdim else [
            f"{v}.flatten(2).mean(dim=-1)", f"torch.flatten(F.adaptive_avg_pool{nd}d({v}, 1), 1)",
            f"F.adaptive_avg_pool{nd}d({v}, 1).view({v}.size(0), -1)"]
    elif what == "max":
        forms = [f"torch.amax({v}, dim={dims}{kd})"]
        forms += [f"F.adaptive_max_pool{nd}d({v}, {one})", "module"] if keepdim else [
            f"{v}.flatten(2).max(dim=-1)[0]", f"torch.flatten(F.adaptive_max_pool{nd}d({v}, 1), 1)"]
    else:
        forms = [f"torch.sum({v}, dim={dims}{kd})", f"{v}.sum(dim={tup!r}{kd})"]
        forms += [] if keepdim else [f"{v}.flatten(2).sum(-1)"]
    form = b.pick(forms)
    if form == "module":
        cls = f"nn.Adaptive{'Avg' if what == 'mean' else 'Max'}Pool{nd}d"
        form = f"{b.module(('global_pool', 'pool', 'gap'), f'{cls}({one})')}({v})"
    return form


def _final_lines(final: str, bc_: str) -> tuple[list[str], list[str], list[str]]:
    """A reduction over the channels kept in `bc_` lanes across the blocks of channels: (its lines before
    the loop, in it after a block's pooled `y`, after the loop making `y`)."""
    shape = f"({bc_},)"
    if final in ("sum", "mean"):
        return ([f"fin = tl.zeros({shape}, dtype=tl.float32)"], ["fin += tl.where(ch_mask, y, 0.0)"],
                ["y = tl.sum(fin, axis=0)" + (" / channels" if final == "mean" else "")])
    if final == "max":
        return ([f'fin = tl.full({shape}, float("-inf"), dtype=tl.float32)'],
                ['fin = tl.maximum(fin, tl.where(ch_mask, y, float("-inf")))'], ["y = tl.max(fin, axis=0)"])
    assert final == "logsumexp"
    return ([f"fin_max = tl.full({shape}, -1e30, dtype=tl.float32)", f"fin_sum = tl.zeros({shape}, dtype=tl.float32)"],
            ["new_max = tl.maximum(fin_max, tl.where(ch_mask, y, -1e30))",
             "fin_sum = fin_sum * tl.exp(fin_max - new_max) + tl.where(ch_mask, tl.exp(y - new_max), 0.0)",
             "fin_max = new_max"],
            ["mx = tl.max(fin_max, axis=0)", "y = mx + tl.log(tl.sum(fin_sum * tl.exp(fin_max - mx), axis=0))"])


POOL_WORDS = {"mean": "global average pooling", "max": "global max pooling", "sum": "a sum over the spatial dims"}


def render_conv_global_pool(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "conv_global_pool"
    x, heavy, b, pre = start(rng, style, HEAVY_KINDS)
    nd = len(heavy.input_shape) - 2
    what = rng.choice(POOLS)
    keepdim = rng.random() < 0.5
    pool_line = f"{x} = {_pool_forms(b, what, x, nd, keepdim)}"
    b.fwd.append(pool_line)
    post = mark(b)
    cout = heavy.pshape.split(",")[0]
    b.pshape = heavy.pshape if keepdim else cout  # a parameter broadcast onto the pooled shape
    draw_post(b, rng.choice((0, 1, 1, 2)), params=True)
    final = rng.choice(FINAL) if rng.random() < 0.45 else None
    keep2 = final is not None and rng.random() < 0.5
    second = mark(b)
    if final:
        final_line = f"{x} = {rng.choice(reduce_forms(final, x, '1', keep2))}"
        b.fwd.append(final_line)
        draw_post(b, rng.choice((0, 1)), params=False)
    ops = b.ops[:pre.ops] + [f"{what}_spatial"] + b.ops[pre.ops:second.ops]
    ops += [f"{final}_dim1"] + b.ops[second.ops:] if final else []
    middle = POOL_WORDS[what]
    after = b.ops[pre.ops:second.ops]
    if final:
        middle += (f", {words(after, heavy)}" if after else "") + ", " + REDUCE_WORDS[final].format(d="the channels")
        after = b.ops[second.ops:]
    doc = doc_of(heavy, b.ops[:pre.ops], middle, after)
    ref = reference_spec(heavy, b, doc, [f"return {x}"], "the pooled output" + (", reduced over the channels."
                                                                                  if final else "."))
    style = avoid_clashes(style, sorted(b.taken))

    kname = style.kernel(f"{heavy.kind}_global_{what}_pool")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    y_p, out_p = style.ptr("y"), style.ptr("out")
    bc_, bs = style.pick(BLOCK_NAMES, salt=7)
    form, flag = loop_form(style), style.pick_name(FLAGS, salt=5)

    def walk(single: bool) -> Walk:
        tile = [f"cols = {'' if single else 'start + '}tl.arange(0, {bs})",
                "mask = ch_mask[:, None] & (cols < spatial)[None, :]",
                (f"y = tl.load({y_p} + base + ch.to(tl.int64)[:, None] * spatial + cols[None, :], mask=mask, "
                 "other=0.0).to(tl.float32)")]
        tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch[:, None]", "ch_mask[:, None]") + b.body[:pre.body]
        tile += trace([pool_line])
        return Walk(None if single else f"for start in range(0, spatial, {bs}):", tile, "mask", f"({bc_}, {bs})", 1,
                    "[:, None]", "spatial", rshape=f"({bc_},)")

    stats, value = REDUCE[what]

    def pooled(w: Walk, online: bool) -> list[str]:
        return (w.pass_tile() if w.single else []) + stat_lines(w, stats, online) + [f"y = {value}"]

    pool = pooled(walk(False), form == "online")
    if form == "fits":
        pool = fits_branch(flag, pooled(walk(True), False), pool)
    pool += load_params(style, b.loads[post.loads:], "ch", "ch_mask") + b.body[post.body:second.body]
    lines = ["row = tl.program_id(axis=0)", "base = row.to(tl.int64) * channels * spatial"]
    if final:  # one program per sample: the channels in blocks, their reduction in BLOCK_C lanes across them
        init, update, combine = _final_lines(final, bc_)
        lines += init + [f"for cstart in range(0, channels, {bc_}):", f"    ch = cstart + tl.arange(0, {bc_})",
                         "    ch_mask = ch < channels"] + indent(pool + trace([final_line]) + update)
        lines += combine + b.body[second.body:]
        lines.append(f"tl.store({out_p} + row, {store_cast(style, 'y', out_p)})")
    else:
        lines += [f"ch = tl.program_id(axis=1) * {bc_} + tl.arange(0, {bc_})", "ch_mask = ch < channels"] + pool
        lines.append(f"tl.store({out_p} + row.to(tl.int64) * channels + ch, {store_cast(style, 'y', out_p)}, "
                     "mask=ch_mask)")
    how = {"fits": f"the whole spatial extent in one tile where {flag} (small maps), else a loop over {bs} "
                   "positions at a time",
           "passes": f"a loop over {bs} spatial positions at a time, lanes accumulated",
           "online": f"a loop over {bs} spatial positions at a time, each tile reduced into the accumulator"}[form]
    who = f"every channel, {bc_} at a time" if final else f"{bc_} channels"
    what_c = (f"a program: one sample, {who}; {how}; {POOL_WORDS[what]}" +
              (f", then the {final} over the channels" if final else ""))
    consts = [bc_, bs] + ([flag] if form == "fits" else [])
    kernel = jit(kname, [y_p, out_p, *ptrs, "channels", "spatial", *b.scalars], consts, style, what_c, lines)
    dims = "(batch," + (" channels)" if not final else " 1)" if keep2 else ")")
    if keepdim:
        dims += " + (1,) * (y.dim() - 2)"
    if form == "fits":
        limit, ch_caps = rng.choice(POOL_FITS)
        sizing = [f"{bc_} = min(triton.next_power_of_2(channels), {rng.choice(ch_caps)})",
                  *fits_launch(rng, flag, bs, "spatial", limit, rng.choice(POOL_POSITION_CAPS))]
    else:
        sizing = [f"{bc_} = min(triton.next_power_of_2(channels), {rng.choice(POOL_CHANNEL_CAPS)})",
                  f"{bs} = min(triton.next_power_of_2(spatial), {rng.choice(POOL_POSITION_CAPS)})"]
    call = ", ".join(["y", "out", *params, "channels", "spatial", *b.scalars])
    launch = _launch_head(rng) + [
        f"out = torch.empty({dims}, device=y.device, dtype=y.dtype)", *sizing,
        grid_line(style, "batch," if final else f"batch, triton.cdiv(channels, {bc_})"),
        f"{kname}[grid]({call}, {', '.join(f'{c}={c}' for c in consts)})", "return out"]
    if style.sizes == "published":
        ref.published = published_sizes(rng, heavy)
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                  "the chain, the pooling and what follows it are",
                  f"fused convolution epilogue with global pooling: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain, "keepdim": int(keepdim)})


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32
    return [TemplateInfo("conv_channel_reduce", render_conv_channel_reduce, ("float32",)),
            TemplateInfo("conv_global_pool", render_conv_global_pool, ("float32",))]
