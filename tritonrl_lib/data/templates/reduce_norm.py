"""Level-2 epilogues with a normalisation over groups of channels: a convolution (1D / 2D / 3D or
transposed) or `nn.Linear` kept in PyTorch, a chain of 0-2 cheap ops (epilogue.py's), then group norm
(`nn.GroupNorm(num_groups, out_channels)`, `F.group_norm`) or, after a convolution, instance norm
(`nn.InstanceNorm2d`, `F.instance_norm`), with or without its affine parameters and `eps` as a
constructor argument or not, then 0-2 ops, per-channel parameters among them (`conv_group_norm`).

The solution keeps the heavy op in PyTorch and gives a Triton program one (sample, group): in NC...
layout a group's channels are contiguous, `per_group * spatial` elements. One pass for the mean, one
for the variance (the chain before the norm recomputed each time; or one tile holding the group, every
statistic from registers), then the normalised group written with the norm's weight and bias at each
element's channel (`g * per_group + offset // spatial`) and the chain after it, in float32 over 64-bit
offsets.
"""

from __future__ import annotations

import random

from .base import Example, Style, TemplateInfo, avoid_clashes
from .epilogue import X_NAMES, draw_chain, draw_heavy, kernel_inputs, reference_spec, start_build
from .reduce_common import (LOCALS, Walk, doc_of, draw_post, finish, grid_line, jit, load_params, mark, over_tiles,
                            pre_loads, stat_lines, store_cast)

HEAVY_KINDS = ("linear", "conv1d", "conv2d", "conv2d", "conv2d", "conv3d", "convt2d", "convt3d")


def _norm(rng: random.Random, b, heavy, x: str, instance: bool) -> tuple[list[str], list[str], list[str], bool]:
    """The norm: (reference lines, kernel params, their expressions in forward, has affine parameters)."""
    cname = heavy.pshape.split(",")[0]
    nd = len(heavy.input_shape) - 2
    channels = heavy.dims[cname]
    eps_arg = rng.random() < 0.3
    if not instance:
        groups = rng.choice([d for d in range(2, channels) if channels % d == 0])
        b.constants.append(("num_groups", groups))
        b.init_params.append(("num_groups", "int"))
        b.init_inputs.append("num_groups")
    if eps_arg:
        b.constants.append(("eps", rng.choice((1e-5, 1e-6, 1e-5))))
        b.init_params.append(("eps", "float"))
        b.init_inputs.append("eps")
    eps_kw = ", eps=eps" if eps_arg else ""
    if rng.random() < 0.7:  # a module, KernelBench's usual form
        attr = b.fresh(("instance_norm", "inorm", "norm") if instance else ("group_norm", "gn", "norm"))
        if instance:
            affine = rng.random() < 0.4
            b.init_lines.append(f"self.{attr} = nn.InstanceNorm{nd}d({cname}{eps_kw}{', affine=True' if affine else ''})")
        else:
            affine = rng.random() < 0.85
            b.init_lines.append(f"self.{attr} = nn.GroupNorm(num_groups, {cname}{eps_kw}"
                                f"{'' if affine else ', affine=False'})")
        params = (["norm_weight", "norm_bias"] if affine else []) + ["eps"] + ([] if instance else ["num_groups"])
        exprs = ([f"self.{attr}.weight", f"self.{attr}.bias"] if affine else []) + [f"self.{attr}.eps"]
        exprs += [] if instance else [f"self.{attr}.num_groups"]
        return [f"{x} = self.{attr}({x})"], params, exprs, affine
    if eps_arg:
        b.init_lines.append("self.eps = eps")
    eps_e = "self.eps" if eps_arg else "1e-05"
    kw = ", eps=self.eps" if eps_arg else ""
    if instance:
        return [f"{x} = F.instance_norm({x}{kw})"], ["eps"], [eps_e], False
    b.init_lines.append("self.num_groups = num_groups")
    call = b.pick([f"F.group_norm({x}, self.num_groups{kw})", f"F.group_norm({x}, num_groups=self.num_groups{kw})"])
    return [f"{x} = {call}"], ["eps", "num_groups"], [eps_e, "self.num_groups"], False


def render_conv_group_norm(rng: random.Random, dtype: str, style: Style) -> Example:
    family = "conv_group_norm"
    x = style.pick_name(X_NAMES, salt=1)
    heavy = draw_heavy(rng, style, x, rng.choice(HEAVY_KINDS))
    b = start_build(rng, style, heavy, x)
    b.taken |= LOCALS
    draw_chain(b, rng.choice((0, 0, 1, 1, 2)))
    pre = mark(b)
    instance = not heavy.is_gemm and rng.random() < 0.35
    ref_lines, extra, extra_e, affine = _norm(rng, b, heavy, x, instance)
    b.fwd += ref_lines
    post = mark(b)
    draw_post(b, rng.choice((0, 1, 1, 2)), params=True)
    label = "instance_norm" if instance else "group_norm"
    ops = b.ops[:pre.ops] + [label] + b.ops[pre.ops:]
    middle = "instance normalisation" if instance else "group normalisation"
    doc = doc_of(heavy, b.ops[:pre.ops], middle, b.ops[pre.ops:])
    ref = reference_spec(heavy, b, doc, [f"return {x}"], "a tensor shaped like the heavy op's output.")
    style = avoid_clashes(style, sorted(b.taken - LOCALS))

    kname = style.kernel(f"{heavy.kind}_{label}")
    ptrs, params, exprs = kernel_inputs(heavy, b, style)
    ptrs += [style.ptr("norm_weight"), style.ptr("norm_bias")] if affine else []
    y_p, out_p, o, m, blk, pid = style.ptr("y"), style.ptr("out"), style.offs, style.mask, style.block, style.pid
    single = style.variant % 3 == 0
    tile = [f"{o} = {'' if single else 'start + '}tl.arange(0, {blk})", f"{m} = {o} < group_len",
            f"ch = g * per_group + {o} // spatial",
            f"y = tl.load({y_p} + base + {o}, mask={m}, other=0.0).to(tl.float32)"]
    tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch", m) + b.body[:pre.body]
    w = Walk(None if single else f"for start in range(0, group_len, {blk}):", tile, m, f"({blk},)", 0, "", "group_len")
    lines = [f"{pid} = tl.program_id(axis=0)", f"g = {pid} % num_groups", "per_group = channels // num_groups",
             "group_len = per_group * spatial", f"base = {pid}.to(tl.int64) * group_len"] + (tile if single else [])
    lines += stat_lines(w, ("mean", "var")) + ["rstd = 1.0 / tl.sqrt(var + eps)"]
    body = ["y = (y - mean) * rstd"]
    if affine:
        body += load_params(style, ["norm_weight", "norm_bias"], "ch", m) + ["y = y * norm_weight + norm_bias"]
    body += load_params(style, b.loads[post.loads:], "ch", m) + b.body[post.body:]
    body.append(f"tl.store({out_p} + base + {o}, {store_cast(style, 'y', out_p)}, mask={m})")
    lines += over_tiles(w, body)
    what_c = ("one program per (sample, group), whose elements are contiguous; " +
              ("the whole group in one tile" if single else "a pass for the mean, one for the variance, one writing")
              + f"; {middle} in float32")
    args = [y_p, out_p, *ptrs, "channels", "spatial", "num_groups", "eps", *b.scalars]
    kernel = jit(kname, args, [blk], style, what_c, lines)
    n_norm_ptrs = 2 if affine else 0
    call = ["y", "out", *params, *extra[:n_norm_ptrs], "channels", "spatial", "groups", "eps", *b.scalars]
    launch = ["y = y.contiguous()", "batch, channels = y.shape[0], y.shape[1]",
              rng.choice(["spatial = y.numel() // (batch * channels)", "spatial = y[0, 0].numel()"]),
              "groups = channels" if instance else "groups = num_groups", "out = torch.empty_like(y)",
              "group_len = channels // groups * spatial",
              f"{blk} = triton.next_power_of_2(group_len)" if single else
              f"{blk} = min(triton.next_power_of_2(group_len), {rng.choice((64, 128, 256))})",
              grid_line(style, "batch * groups,"), f"{kname}[grid]({', '.join(call)}, {blk}={blk})", "return out"]
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params + extra, exprs + extra_e,
                  f"the chain, the {middle} and what follows it are",
                  f"fused epilogue with a {label.replace('_', ' ')}: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain})


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32
    return [TemplateInfo("conv_group_norm", render_conv_group_norm, ("float32",))]
