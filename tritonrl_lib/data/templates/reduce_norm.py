"""Level-2 epilogues with a normalisation over groups of channels: a convolution (1D / 2D / 3D or
transposed) or `nn.Linear` kept in PyTorch, a chain of 0-2 cheap ops (epilogue.py's), then group norm
(`nn.GroupNorm(num_groups, out_channels)`, `F.group_norm`) or, after a convolution, instance norm
(`nn.InstanceNorm2d`, `F.instance_norm`), with or without its affine parameters and `eps` as a
constructor argument or not, then 0-2 ops, per-channel parameters among them (`conv_group_norm`).

The solution keeps the heavy op in PyTorch and gives a Triton program one (sample, group): in NC...
layout a group's channels are contiguous, `per_group * spatial` elements (262,144 at KernelBench's
published sizes), walked in tiles of at most 2048: one pass for the mean, one for the variance (the
chain before the norm recomputed each time), or one pass of Welford's mean and M2 per lane; or, in the
"fits" form, the group in one tile on registers when the launcher finds it small (at most 1024-4096
elements), else the passes. Then the normalised group is written with the norm's weight and bias at
each element's channel (`g * per_group + offset // spatial`) and the chain after it, in float32 over
64-bit offsets.
"""

from __future__ import annotations

import random

from .base import Example, Style, TemplateInfo, avoid_clashes
from .epilogue import kernel_inputs, reference_spec, trace
from .reduce_common import (FLAGS, LOCALS, TILE_DIM_CAP, Walk, doc_of, draw_post, finish, fits_branch, fits_launch,
                            grid_line, jit, load_params, loop_form, mark, over_tiles, pre_loads, published_sizes,
                            start, stat_lines, store_cast)

HEAVY_KINDS = ("linear", "conv1d", "conv2d", "conv2d", "conv2d", "conv3d", "convt2d", "convt3d")
GROUP_CAPS = (256, 512, 1024, 1024, 2048)  # a tile of the "passes" and "online" forms
FITS = ((1024, (256, 512, 1024)), (2048, (512, 1024)), (4096, (1024, 2048)))  # "fits": (one tile up to, else tiles of)
assert max(GROUP_CAPS) <= TILE_DIM_CAP and all(max(caps) <= limit <= TILE_DIM_CAP for limit, caps in FITS)


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
    x, heavy, b, pre = start(rng, style, HEAVY_KINDS, chain_lengths=(0, 0, 1, 1, 2))
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
    form, flag = loop_form(style), style.pick_name(FLAGS, salt=5)

    def walk(single: bool) -> Walk:
        tile = [f"{o} = {'' if single else 'start + '}tl.arange(0, {blk})", f"{m} = {o} < group_len",
                f"ch = g * per_group + {o} // spatial",
                f"y = tl.load({y_p} + base + {o}, mask={m}, other=0.0).to(tl.float32)"]
        tile += pre_loads(heavy, b, style, b.loads[:pre.loads], "ch", m) + b.body[:pre.body] + trace(ref_lines)
        return Walk(None if single else f"for start in range(0, group_len, {blk}):", tile, m, f"({blk},)", 0, "",
                    "group_len")

    body = ["y = (y - mean) * rstd"]
    if affine:
        body += load_params(style, ["norm_weight", "norm_bias"], "ch", m) + ["y = y * norm_weight + norm_bias"]
    body += load_params(style, b.loads[post.loads:], "ch", m) + b.body[post.body:]
    body.append(f"tl.store({out_p} + base + {o}, {store_cast(style, 'y', out_p)}, mask={m})")

    def norm(w: Walk, online: bool) -> list[str]:
        return ((w.pass_tile() if w.single else []) + stat_lines(w, ("mean", "var"), online)
                + ["rstd = 1.0 / tl.sqrt(var + eps)"] + over_tiles(w, body))

    lines = [f"{pid} = tl.program_id(axis=0)", f"g = {pid} % num_groups", "per_group = channels // num_groups",
             "group_len = per_group * spatial", f"base = {pid}.to(tl.int64) * group_len"]
    tiles = norm(walk(False), form == "online")
    lines += fits_branch(flag, norm(walk(True), False), tiles) if form == "fits" else tiles
    how = {"fits": f"the whole group in one tile where {flag} (small groups), else a pass for the mean, one for the "
                   "variance, one writing",
           "passes": "a pass for the mean, one for the variance, one writing",
           "online": "one pass of Welford's mean and M2 per lane, one writing"}[form]
    what_c = f"one program per (sample, group), whose elements are contiguous; {how}; {middle} in float32"
    args = [y_p, out_p, *ptrs, "channels", "spatial", "num_groups", "eps", *b.scalars]
    consts = [blk] + ([flag] if form == "fits" else [])
    kernel = jit(kname, args, consts, style, what_c, lines)
    n_norm_ptrs = 2 if affine else 0
    call = ["y", "out", *params, *extra[:n_norm_ptrs], "channels", "spatial", "groups", "eps", *b.scalars]
    if form == "fits":
        limit, caps = rng.choice(FITS)
        sizing = fits_launch(rng, flag, blk, "group_len", limit, rng.choice(caps))
    else:
        sizing = [f"{blk} = min(triton.next_power_of_2(group_len), {rng.choice(GROUP_CAPS)})"]
    launch = ["y = y.contiguous()", "batch, channels = y.shape[0], y.shape[1]",
              rng.choice(["spatial = y.numel() // (batch * channels)", "spatial = y[0, 0].numel()"]),
              "groups = channels" if instance else "groups = num_groups", "out = torch.empty_like(y)",
              "group_len = channels // groups * spatial", *sizing,
              grid_line(style, "batch * groups,"),
              f"{kname}[grid]({', '.join(call)}, {', '.join(f'{c}={c}' for c in consts)})", "return out"]
    if style.sizes == "published":
        ref.published = published_sizes(rng, heavy)
        if ref.published and not instance:  # num_groups divides the published channels (16-128, 512-8192)
            channels = ref.published[heavy.pshape.split(",")[0]]
            ref.published["num_groups"] = rng.choice([g for g in (2, 4, 8, 16, 32) if channels % g == 0
                                                      and g < channels])
    chain = " -> ".join(ops)
    return finish(family, heavy, b, style, ref, kname, kernel, launch, params + extra, exprs + extra_e,
                  f"the chain, the {middle} and what follows it are",
                  f"fused epilogue with a {label.replace('_', ' ')}: {heavy.kind} -> {chain}", dtype,
                  heavy.dims | {"chain": chain})


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32
    return [TemplateInfo("conv_group_norm", render_conv_group_norm, ("float32",))]
