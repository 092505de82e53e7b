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

Over the channels a program owns one sample and BLOCK_S spatial positions and walks the channels in
[BLOCK_C, BLOCK_S] tiles (channel stride: the spatial size). Global pooling gives a program one sample
and BLOCK_C channels (all of them when the channels are reduced after) and walks the spatial extent.
"""

from __future__ import annotations

import random

from .base import Example, Style, TemplateInfo, avoid_clashes
from .epilogue import X_NAMES, Build, Heavy, draw_chain, draw_heavy, kernel_inputs, reference_spec, start_build
from .reduce_common import (LOCALS, NORMALIZE, REDUCE, REDUCE_WORDS, Mark, Walk, doc_of, draw_post, finish, grid_line,
                            jit, load_params, mark, normalize_forms, over_tiles, pre_loads, reduce_forms,
                            stat_lines, store_cast, words)

HEAVY_KINDS = ("conv1d", "conv2d", "conv2d", "conv2d", "conv3d", "convt2d", "convt2d", "convt3d")
CHANNEL_OPS = ("sum", "mean", "max", "min", "min", "logsumexp", "norm", "softmax", "softmax", "log_softmax",
               "center", "max_sub")
POOLS = ("mean", "mean", "mean", "max", "max", "sum")
FINAL = ("sum", "mean", "max", "logsumexp", "logsumexp")
BLOCK_NAMES = (("BLOCK_C", "BLOCK_S"), ("BLOCK_R", "BLOCK_I"), ("BLOCK_CH", "BLOCK_HW"))


def _setup(rng: random.Random, style: Style) -> tuple[str, Heavy, Build, Mark, int]:
    x = style.pick_name(X_NAMES, salt=1)
    heavy = draw_heavy(rng, style, x, rng.choice(HEAVY_KINDS))
    b = start_build(rng, style, heavy, x)
    b.taken |= LOCALS
    draw_chain(b, rng.choice((0, 1, 1, 2, 2, 3)))
    return x, heavy, b, mark(b), len(heavy.input_shape) - 2


def _launch_head(rng: random.Random) -> list[str]:
    return ["y = y.contiguous()", "batch, channels = y.shape[0], y.shape[1]",
            rng.choice(["spatial = y.numel() // (batch * channels)", "spatial = y[0, 0].numel()"])]


# --------------------------------------------------------------------------- over the channels


def render_conv_channel_reduce(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "conv_channel_reduce"
    x, heavy, b, pre, nd = _setup(rng, style)
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
    single = style.variant % 3 == 0
    tile = [f"ch = {'' if single else 'start + '}tl.arange(0, {bc_})[:, None]", "ch_mask = ch < channels",
            "mask = ch_mask & col_mask[None, :]",
            f"y = tl.load({y_p} + base + ch.to(tl.int64) * spatial + cols[None, :], mask=mask, other=0.0)"
            ".to(tl.float32)"]
    tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch", "ch_mask") + b.body[:pre.body]
    w = Walk(None if single else f"for start in range(0, channels, {bc_}):", tile, "ch_mask", f"({bc_}, {bs})", 0,
             "[None, :]", "channels")
    lines = ["row = tl.program_id(axis=0)", f"cols = tl.program_id(axis=1) * {bs} + tl.arange(0, {bs})",
             "col_mask = cols < spatial", "base = row.to(tl.int64) * channels * spatial"] + (tile if single else [])
    if reduces:
        stats, value = REDUCE[what]
        lines += stat_lines(w, stats) + [f"y = {value}"] + b.body[post.body:]
        lines.append(f"tl.store({out_p} + row.to(tl.int64) * spatial + cols, {store_cast(style, 'y', out_p)}, "
                     "mask=col_mask)")
    else:
        stats, value = NORMALIZE[what]
        lines += stat_lines(w, stats)
        body = [f"y = {value.format(bc='[None, :]')}"] + load_params(style, b.loads[post.loads:], "ch", "ch_mask")
        body += b.body[post.body:]
        body.append(f"tl.store({out_p} + base + ch.to(tl.int64) * spatial + cols[None, :], "
                    f"{store_cast(style, 'y', out_p)}, mask=mask)")
        lines += over_tiles(w, body)
    what_c = (f"a program: one sample, {bs} spatial positions; " +
              ("every channel in one tile" if single else f"a pass over [{bc_}, {bs}] channel tiles per statistic")
              + f"; the {what} over the channels in float32")
    kernel = jit(kname, [y_p, out_p, *ptrs, "channels", "spatial", *b.scalars], [bc_, bs], style, what_c, lines)
    out = ("torch.empty((batch, 1, *y.shape[2:]), device=y.device, dtype=y.dtype)" if keepdim else
           "torch.empty((batch, *y.shape[2:]), device=y.device, dtype=y.dtype)" if reduces else "torch.empty_like(y)")
    launch = _launch_head(rng) + [
        f"out = {out}",
        f"{bc_} = triton.next_power_of_2(channels)" if single else
        f"{bc_} = min(triton.next_power_of_2(channels), {rng.choice((4, 8, 16))})",
        f"{bs} = min(triton.next_power_of_2(spatial), {rng.choice((64, 128, 256))})",
        grid_line(style, f"batch, triton.cdiv(spatial, {bs})"),
        f"{kname}[grid]({', '.join(['y', 'out', *params, 'channels', 'spatial', *b.scalars])}, {bc_}={bc_}, {bs}={bs})",
        "return out"]
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


POOL_WORDS = {"mean": "global average pooling", "max": "global max pooling", "sum": "a sum over the spatial dims"}


def render_conv_global_pool(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "conv_global_pool"
    x, heavy, b, pre, nd = _setup(rng, style)
    what = rng.choice(POOLS)
    keepdim = rng.random() < 0.5
    b.fwd.append(f"{x} = {_pool_forms(b, what, x, nd, keepdim)}")
    post = mark(b)
    cout = heavy.pshape.split(",")[0]
    b.pshape = heavy.pshape if keepdim else cout  # a parameter broadcast onto the pooled shape
    draw_post(b, rng.choice((0, 1, 1, 2)), params=True)
    final = rng.choice(FINAL) if rng.random() < 0.45 else None
    keep2 = final is not None and rng.random() < 0.5
    second = mark(b)
    if final:
        b.fwd.append(f"{x} = {rng.choice(reduce_forms(final, x, '1', keep2))}")
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
    single = style.variant % 3 == 0
    tile = [f"cols = {'' if single else 'start + '}tl.arange(0, {bs})",
            "mask = ch_mask[:, None] & (cols < spatial)[None, :]",
            f"y = tl.load({y_p} + base + ch.to(tl.int64)[:, None] * spatial + cols[None, :], mask=mask, other=0.0)"
            ".to(tl.float32)"]
    tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch[:, None]", "ch_mask[:, None]") + b.body[:pre.body]
    w = Walk(None if single else f"for start in range(0, spatial, {bs}):", tile, "mask", f"({bc_}, {bs})", 1,
             "[:, None]", "spatial")
    lines = ["row = tl.program_id(axis=0)", f"ch = tl.program_id(axis=1) * {bc_} + tl.arange(0, {bc_})",
             "ch_mask = ch < channels", "base = row.to(tl.int64) * channels * spatial"] + (tile if single else [])
    stats, value = REDUCE[what]
    lines += stat_lines(w, stats) + [f"y = {value}"]
    lines += load_params(style, b.loads[post.loads:], "ch", "ch_mask") + b.body[post.body:second.body]
    if final:
        fstats, fvalue = REDUCE[final]
        fw = Walk(None, [], "ch_mask", "", 0, "", "channels")
        lines += stat_lines(fw, fstats) + [f"y = {fvalue}"] + b.body[second.body:]
        lines.append(f"tl.store({out_p} + row, {store_cast(style, 'y', out_p)})")
    else:
        lines.append(f"tl.store({out_p} + row.to(tl.int64) * channels + ch, {store_cast(style, 'y', out_p)}, "
                     "mask=ch_mask)")
    what_c = (f"a program: one sample, {'every channel' if final else bc_ + ' channels'}; " +
              ("the whole spatial extent in one tile" if single else f"a loop over {bs} spatial positions at a time")
              + f"; {POOL_WORDS[what]}" + (f", then the {final} over the channels" if final else ""))
    kernel = jit(kname, [y_p, out_p, *ptrs, "channels", "spatial", *b.scalars], [bc_, bs], style, what_c, lines)
    dims = "(batch," + (" channels)" if not final else " 1)" if keep2 else ")")
    if keepdim:
        dims += " + (1,) * (y.dim() - 2)"
    launch = _launch_head(rng) + [
        f"out = torch.empty({dims}, device=y.device, dtype=y.dtype)",
        f"{bc_} = triton.next_power_of_2(channels)" if final else
        f"{bc_} = min(triton.next_power_of_2(channels), {rng.choice((4, 8, 16))})",
        f"{bs} = triton.next_power_of_2(spatial)" if single else
        f"{bs} = min(triton.next_power_of_2(spatial), {rng.choice((32, 64, 128))})",
        grid_line(style, "batch, 1" if final else f"batch, triton.cdiv(channels, {bc_})"),
        f"{kname}[grid]({', '.join(['y', 'out', *params, 'channels', 'spatial', *b.scalars])}, {bc_}={bc_}, {bs}={bs})",
        "return out"]
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                  "the chain, the pooling and what follows it are",
                  f"fused convolution epilogue with global pooling: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain, "keepdim": int(keepdim)})


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32
    return [TemplateInfo("conv_channel_reduce", render_conv_channel_reduce, ("float32",)),
            TemplateInfo("conv_global_pool", render_conv_global_pool, ("float32",))]
