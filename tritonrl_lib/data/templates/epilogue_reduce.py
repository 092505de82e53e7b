"""Level-2 epilogue chains that end in a reduction: a GEMM or a convolution kept in PyTorch, a chain
of 0-3 cheap ops (epilogue.py's), then `torch.sum(x, dim=1, keepdim=True)`, a mean over dim 1,
`torch.max(x, dim=1)[0]`, `torch.logsumexp(x, dim=1)` or a mean over the spatial dims (global average
pooling), each written the ways people write it.

The solution applies the chain and the reduction in one Triton kernel. Over dim 1 the heavy output is
read as (rows, reduce_len, inner): a program owns one row and BLOCK_I inner positions and walks the
reduced dim in [BLOCK_R, BLOCK_I] tiles (the tile's channel, or feature, is its reduce index);
logsumexp walks it twice, for the maximum and then the sum of exponentials. Global average pooling
gives a program one (sample, channel) row of `spatial` elements. Accumulation is in float32 over
64-bit offsets.
"""

from __future__ import annotations

import random

from .base import Example, Style, TemplateInfo, avoid_clashes, comment
from .epilogue import (X_NAMES, Build, Heavy, chain_words, draw_chain, draw_heavy, finish_epilogue, kernel_inputs, load_lines,
                       reference_spec, start_build, store_value, trace, untraced)

HEAVY_KINDS = ("linear", "matmul", "conv1d", "conv2d", "conv2d", "conv3d", "convt2d")
REDUCE_LABELS = {"sum": "sum_dim1", "mean": "mean_dim1", "max": "max_dim1", "logsumexp": "logsumexp_dim1",
                 "gap": "global_avg_pool"}
LOCALS = {"mask", "ch_mask", "col_mask", "base", "total", "run_max", "run_sum", "rows", "reduce_len", "BLOCK_R",
          "BLOCK_I", "out_shape"}


def _tail(rng: random.Random, what: str, keepdim: bool, nd: int, v: str) -> tuple[str, str]:
    """(the reference's reduction expression, what it is in words)."""
    kd = ", keepdim=True" if keepdim else ""
    if what == "sum":
        forms = [f"torch.sum({v}, dim=1{kd})", f"{v}.sum(dim=1{kd})"] + ([] if keepdim else [f"{v}.sum(1)"])
        words = "a sum over dim 1"
    elif what == "mean":
        forms = [f"torch.mean({v}, dim=1{kd})", f"{v}.mean(dim=1{kd})"]
        words = "a mean over dim 1"
    elif what == "max":
        forms = [f"torch.max({v}, dim=1{kd})[0]", f"torch.amax({v}, dim=1{kd})", f"{v}.max(dim=1{kd}).values"]
        words = "a maximum over dim 1"
    elif what == "logsumexp":
        forms = [f"torch.logsumexp({v}, dim=1{kd})", f"{v}.logsumexp(dim=1{kd})"]
        words = "logsumexp over dim 1"
    else:
        dims = list(range(2, 2 + nd))
        forms = [f"torch.mean({v}, dim={dims}{kd})", f"{v}.mean(dim={tuple(dims)!r}{kd})"]
        forms += [f"F.adaptive_avg_pool{nd}d({v}, 1)"] if keepdim else []
        words = "global average pooling over the spatial dims"
    return rng.choice(forms), words


def _dim1_kernel(name: str, heavy: Heavy, b: Build, style: Style, what: str, args: list[str], y_p: str,
                 out_p: str, traced: list[str]) -> str:
    idx = "feat" if heavy.per_feature else "ch"
    tile = [f"{idx} = start + tl.arange(0, BLOCK_R)[:, None]", f"ch_mask = {idx} < reduce_len",
            "mask = ch_mask & col_mask[None, :]",
            f"y = tl.load({y_p} + base + {idx}.to(tl.int64) * inner + cols[None, :], mask=mask, other=0.0).to(tl.float32)"]
    tile += load_lines(heavy, b, style, idx, "ch_mask") + b.body + trace(traced)
    loop = ["for start in range(0, reduce_len, BLOCK_R):"] + [f"    {ln}" for ln in tile]
    again = untraced(loop)  # logsumexp's second pass recomputes the chain: its trace stands in the first
    lines = ["row = tl.program_id(axis=0)", "cols = tl.program_id(axis=1) * BLOCK_I + tl.arange(0, BLOCK_I)",
             "col_mask = cols < inner", "base = row.to(tl.int64) * reduce_len * inner"]
    if what in ("sum", "mean"):
        lines += ["acc = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.float32)"] + loop
        lines += ["    acc += tl.where(ch_mask, y, 0.0)", "total = tl.sum(acc, axis=0)"]
        lines += ["total = total / reduce_len"] if what == "mean" else []
    elif what == "max":
        lines += ['acc = tl.full((BLOCK_R, BLOCK_I), float("-inf"), dtype=tl.float32)'] + loop
        lines += ['    acc = tl.maximum(acc, tl.where(ch_mask, y, float("-inf")))', "total = tl.max(acc, axis=0)"]
    else:  # logsumexp: the maximum first, then the sum of exponentials below it
        lines += ['run_max = tl.full((BLOCK_I,), float("-inf"), dtype=tl.float32)'] + loop
        lines += ['    run_max = tl.maximum(run_max, tl.max(tl.where(ch_mask, y, float("-inf")), axis=0))',
                  "run_sum = tl.zeros((BLOCK_I,), dtype=tl.float32)"] + again
        lines += ["    run_sum += tl.sum(tl.where(ch_mask, tl.exp(y - run_max[None, :]), 0.0), axis=0)",
                  "total = run_max + tl.log(run_sum)"]
    lines.append(f"tl.store({out_p} + row.to(tl.int64) * inner + cols, {store_value(style, 'total', out_p)}, "
                 "mask=col_mask)")
    what_c = "a program: one row, BLOCK_I inner positions; the chain on each [BLOCK_R, BLOCK_I] tile, then " + \
        ("two passes (maximum, then the sum of exponentials)" if what == "logsumexp" else f"the {what}")
    return (f"@triton.jit\ndef {name}({', '.join(args)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):\n"
            + comment(style, what_c) + "\n".join(f"    {ln}" for ln in lines) + "\n")


def _gap_kernel(name: str, heavy: Heavy, b: Build, style: Style, args: list[str], y_p: str, out_p: str,
                traced: list[str]) -> str:
    blk = style.block
    lines = ["row = tl.program_id(axis=0)", "ch = row % channels", "base = row.to(tl.int64) * spatial",
             f"acc = tl.zeros(({blk},), dtype=tl.float32)", f"for start in range(0, spatial, {blk}):",
             f"    cols = start + tl.arange(0, {blk})", "    mask = cols < spatial",
             f"    y = tl.load({y_p} + base + cols, mask=mask, other=0.0).to(tl.float32)"]
    lines += [f"    {ln}" for ln in load_lines(heavy, b, style, "ch", None) + b.body + trace(traced)]
    lines += ["    acc += tl.where(mask, y, 0.0)", "total = tl.sum(acc, axis=0) / spatial"]
    lines.append(f"tl.store({out_p} + row, {store_value(style, 'total', out_p)})")
    return (f"@triton.jit\ndef {name}({', '.join(args)}, {blk}: tl.constexpr):\n"
            + comment(style, "one program per (sample, channel): the chain, then the mean over its spatial elements")
            + "\n".join(f"    {ln}" for ln in lines) + "\n")


def render_chain_reduce(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "chain_reduce"
    x = style.pick_name(X_NAMES, salt=1)
    heavy = draw_heavy(rng, style, x, rng.choice(HEAVY_KINDS), allow_3d=False)
    b = start_build(rng, style, heavy, x)
    b.taken |= LOCALS
    draw_chain(b, rng.choice((0, 1, 1, 2, 2, 3)))
    what = rng.choice(("sum", "mean", "max", "logsumexp") + (() if heavy.is_gemm else ("gap", "gap")))
    keepdim = rng.random() < 0.5
    nd = len(heavy.input_shape) - 2
    expr, words = _tail(rng, what, keepdim, nd, x)
    tail = rng.choice([[f"return {expr}"], [f"{x} = {expr}", f"return {x}"]])
    ops = b.ops + [REDUCE_LABELS[what]]
    chain = " -> ".join(ops)
    steps = chain_words(b.ops, heavy)
    doc = f"{heavy.desc[0].upper()}{heavy.desc[1:]}, {steps + ', then ' if steps else 'then '}{words}."
    ref = reference_spec(heavy, b, doc, tail, f"the reduced output ({'kept dims' if keepdim else 'dims dropped'}).")
    style = avoid_clashes(style, sorted(b.taken))

    kname = style.kernel(f"{family}_{what}")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    y_p, out_p = style.ptr("y"), style.ptr("out")
    launch = ["y = y.contiguous()"]
    if what == "gap":
        args = [y_p, out_p, *ptrs, "spatial", "channels", *b.scalars]
        kernel = _gap_kernel(kname, heavy, b, style, args, y_p, out_p, tail[:1])
        launch += ["channels = y.shape[1]", "spatial = y.numel() // (y.shape[0] * channels)",
                   "out_shape = tuple(y.shape[:2])" + (" + (1,) * (y.dim() - 2)" if keepdim else ""),
                   "out = torch.empty(out_shape, device=y.device, dtype=y.dtype)",
                   f"{style.block} = min(triton.next_power_of_2(spatial), 1024)", "grid = (y.shape[0] * channels,)",
                   (f"{kname}[grid]({', '.join(['y', 'out', *params, 'spatial', 'channels', *b.scalars])}, "
                    f"{style.block}={style.block})")]
    else:
        args = [y_p, out_p, *ptrs, "reduce_len", "inner", *b.scalars]
        kernel = _dim1_kernel(kname, heavy, b, style, what, args, y_p, out_p, tail[:1])
        launch += ["rows, reduce_len = y.shape[0], y.shape[1]", "inner = y.numel() // (rows * reduce_len)",
                   f"out_shape = (rows, {'1, ' if keepdim else ''}*y.shape[2:])",
                   "out = torch.empty(out_shape, device=y.device, dtype=y.dtype)",
                   f"BLOCK_R = min(triton.next_power_of_2(reduce_len), {rng.choice((16, 32, 64))})",
                   "BLOCK_I = min(triton.next_power_of_2(inner), 128)", "grid = (rows, triton.cdiv(inner, BLOCK_I))",
                   (f"{kname}[grid]({', '.join(['y', 'out', *params, 'reduce_len', 'inner', *b.scalars])}, "
                    "BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)")]
    launch.append("return out")
    return finish_epilogue(family, heavy, b, style, ref, kname, kernel, launch, params, exprs,
                           "the chain and the reduction after it are",
                           f"fused epilogue with a reduction: {heavy.kind} -> {chain}", dtype,
                           heavy.dims | {"chain": chain, "keepdim": int(keepdim)})


def templates() -> list[TemplateInfo]:
    return [TemplateInfo("chain_reduce", render_chain_reduce, ("float32",))]
