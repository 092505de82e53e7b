"""Per-channel templates: batch norm, group norm, and convolution epilogues (Level 2).

Batch norm takes two kernels: per-channel statistics (in training mode; the running averages are
updated in the same kernel, as nn.BatchNorm does) and a flat normalise pass that finds each
element's channel as (index // (H*W)) % C. In eval mode the running statistics feed the same
normalise pass. A convolution stays in PyTorch (the fusion policy allows it); what follows it is
one Triton epilogue over the convolution's NC(H)W output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from . import scale
from .base import Example, RefSpec, SolSpec, Style, TemplateInfo, comment, make_example, randn

SIZES_4D = [("batch_size", "channels", "height", "width"), ("N", "C", "H", "W"), ("batch", "features", "h", "w"),
            ("batch_size", "num_features", "dim1", "dim2"), ("B", "C", "H", "W")]
X_NAMES = ("x", "x", "inp", "input_tensor", "input", "X", "x")
RELU_FORMS = [([], "return torch.relu({x})"), ([], "return F.relu({x})"), (["self.relu = nn.ReLU()"], "return self.relu({x})"),
              ([], "return {x}.relu()")]
PUBLISHED_4D = (scale.BATCH, scale.CHANNELS, scale.SPATIAL, scale.SPATIAL)


def _stats_kernel(name: str, style: Style) -> str:
    b = style.block
    return f"""
@triton.jit
def {name}(x_ptr, mean_ptr, var_ptr, running_mean_ptr, running_var_ptr, tracked_ptr, n_batch, channels, hw,
           momentum, UPDATE_RUNNING: tl.constexpr, {b}: tl.constexpr):
{comment(style, "one program per channel: mean and biased variance over (N, H, W), two passes for accuracy")}    c = tl.program_id(0)
    offs = tl.arange(0, {b})
    count = n_batch * hw
    acc = tl.zeros(({b},), dtype=tl.float32)
    for n in range(n_batch):
        base = x_ptr + (n * channels + c) * hw
        for start in range(0, hw, {b}):
            idx = start + offs
            acc += tl.load(base + idx, mask=idx < hw, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / count
    acc = tl.zeros(({b},), dtype=tl.float32)
    for n in range(n_batch):
        base = x_ptr + (n * channels + c) * hw
        for start in range(0, hw, {b}):
            idx = start + offs
            v = tl.load(base + idx, mask=idx < hw, other=0.0).to(tl.float32)
            d = tl.where(idx < hw, v - mean, 0.0)
            acc += d * d
    var = tl.sum(acc, axis=0) / count
    tl.store(mean_ptr + c, mean)
    tl.store(var_ptr + c, var)
    if UPDATE_RUNNING:
        rm = tl.load(running_mean_ptr + c)
        rv = tl.load(running_var_ptr + c)
        tl.store(running_mean_ptr + c, (1.0 - momentum) * rm + momentum * mean)
        tl.store(running_var_ptr + c, (1.0 - momentum) * rv + momentum * var * count / tl.maximum(count - 1, 1))
        if c == 0:  # one program advances the batch counter, as nn.BatchNorm2d does
            tl.store(tracked_ptr, tl.load(tracked_ptr) + 1)
"""


def _apply_kernel(name: str, style: Style, relu: bool) -> str:
    b, o, m = style.block, style.offs, style.mask
    act = "    y = tl.maximum(y, 0.0)\n" if relu else ""
    offsets = "\n".join(f"    {ln}" for ln in scale.block_offsets(style, "pid", b, o))
    return f"""
@triton.jit
def {name}(x_ptr, out_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, n_elements, channels, hw, eps, {b}: tl.constexpr):
{comment(style, "flat pass: each element finds its channel's statistics and affine parameters")}    pid = tl.program_id(0)
{offsets}
    {m} = {o} < n_elements
    c = ({o} // hw) % channels
    x = tl.load(x_ptr + {o}, mask={m}, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + c, mask={m}, other=0.0)
    var = tl.load(var_ptr + c, mask={m}, other=1.0)
    w = tl.load(w_ptr + c, mask={m}, other=1.0).to(tl.float32)
    bias = tl.load(b_ptr + c, mask={m}, other=0.0).to(tl.float32)
    y = (x - mean) / tl.sqrt(var + eps) * w + bias
{act}    tl.store(out_ptr + {o}, y, mask={m})
"""


def _bn_launch(style: Style, x: str, bn: str, stats: str, apply: str) -> list[str]:
    b = style.block
    return [f"{x} = {x}.contiguous()",
            f"n_batch, channels = {x}.shape[0], {x}.shape[1]",
            f"hw = {x}.numel() // (n_batch * channels)",
            f"out = torch.empty_like({x})",
            f"if {bn}.training or not {bn}.track_running_stats:",
            f"    mean = torch.empty(channels, device={x}.device, dtype=torch.float32)",
            f"    var = torch.empty(channels, device={x}.device, dtype=torch.float32)",
            f"    update = {bn}.training and {bn}.track_running_stats",
            f"    running_mean = {bn}.running_mean if update else mean",
            f"    running_var = {bn}.running_var if update else var",
            f"    tracked = {bn}.num_batches_tracked if update else mean",
            f"    if {bn}.momentum is None:  # cumulative average over the batches seen",
            f"        momentum = 1.0 / (int({bn}.num_batches_tracked) + 1)",
            "    else:",
            f"        momentum = {bn}.momentum",
            f"    {stats}[(channels,)]({x}, mean, var, running_mean, running_var, tracked, n_batch, channels, hw,",
            f"        momentum, UPDATE_RUNNING=update, {b}=min(triton.next_power_of_2(hw), 1024))",
            "else:",
            f"    mean, var = {bn}.running_mean, {bn}.running_var",
            "n_elements = out.numel()",
            f"grid = (triton.cdiv(n_elements, {style.block_size}),)",
            f"{apply}[grid]({x}, out, mean, var, {bn}.weight, {bn}.bias, n_elements, channels, hw, {bn}.eps,",
            f"    {b}={style.block_size})",
            "return out"]


def render_batch_norm(rng: random.Random, dtype: str, style: Style, conv: bool = False) -> Example:
    family = "conv2d_bn_relu" if conv else "batch_norm"
    sizes = list(style.pick_name(SIZES_4D))
    x = style.pick_name(X_NAMES, salt=1)
    bn_attr = style.pick(("bn", "batch_norm", "norm", "bn"), salt=2)
    dims = [rng.choice((2, 4)), rng.choice((3, 4, 8)), rng.choice((4, 8, 12)), rng.choice((4, 8, 12))]
    constants = list(zip(sizes, dims))
    if conv:
        out_ch = rng.choice((4, 8))
        k = 3
        sizes_in = sizes[1]
        constants += [("out_channels", out_ch), ("kernel_size", k)]
        init_params = [(sizes_in, "int"), ("out_channels", "int"), ("kernel_size", "int")]
        init_lines = [f"self.conv = nn.Conv2d({sizes_in}, out_channels, kernel_size)",
                      f"self.{bn_attr} = nn.BatchNorm2d(out_channels)"]
        own_init, relu = style.pick(RELU_FORMS, salt=style.phrasing)
        fwd = [f"{x} = self.conv({x})", f"{x} = self.{bn_attr}({x})", relu.format(x=x)]
        init_inputs = [sizes_in, "out_channels", "kernel_size"]
        doc = "A 2D convolution, batch normalisation, then ReLU."
    else:
        init_params = [(sizes[1], "int")]
        init_lines = [f"self.{bn_attr} = nn.BatchNorm2d({sizes[1]})"]
        own_init, fwd = [], [f"return self.{bn_attr}({x})"]
        init_inputs = [sizes[1]]
        doc = "Applies batch normalisation over the channels of a 4D input."
    ref = RefSpec(doc=doc, init_params=init_params, init_lines=init_lines + own_init, forward_args=[x],
                  forward_lines=fwd, constants=constants, inputs=[(x, randn(sizes, dtype))], init_inputs=init_inputs,
                  forward_doc="a tensor shaped like the (convolved) input.",
                  imports=["import torch.nn.functional as F"] if any("F." in ln for ln in fwd) else [],
                  arg_docs={sizes[1]: "Number of input channels." if conv else "Number of channels to normalise."})
    if style.sizes == "published":  # per-channel loops and a flat pass: every size grows
        choices = [scale.BATCH, scale.IN_CHANNELS if conv else scale.CHANNELS, scale.SPATIAL, scale.SPATIAL]
        names = sizes + (["out_channels"] if conv else [])
        choices += [(16, 32, 64, 128)] if conv else []
        ref.published = dict(zip(names, scale.draw(rng, choices, fits=lambda d: _fits_4d(d, conv))))
    stats = style.kernel(f"{family}_stats")
    apply = style.kernel(f"{family}_apply")
    kernels = [_stats_kernel(stats, style), _apply_kernel(apply, style, relu=conv)]
    bn = "bn" if style.launcher == "function" else f"self.{bn_attr}"
    launch = _bn_launch(style, "y" if conv else x, bn, stats, apply)
    pre = [f"y = self.conv({x})"] if conv else []
    if style.launcher == "function":
        fn = style.pick_name(("{}", "triton_{}", "launch_{}"), salt=3).format(family)
        arg = "y" if conv else x
        helpers = [f"def {fn}({arg}, bn):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n"]
        forward = pre + [f"return {fn}({arg}, self.{bn_attr})"]
    else:
        helpers = []
        forward = pre + launch
    sol = SolSpec(kernels=kernels, helpers=helpers, forward_lines=forward, init_lines=None)
    return make_example(family, ref, sol, style, "fused convolution epilogue: batch norm and ReLU" if conv else doc,
                        dtype, dict(zip(sizes, dims)))


def _fits_4d(dims: list[int], conv: bool) -> bool:
    """Do the input and (for a convolution) its output stay within int32 offsets? dims: (N, C, H, W[, C_out])."""
    n, c, h, w = dims[:4]
    return n * max(c, dims[4] if conv else 0) * h * w < scale.INT32_SAFE


# --------------------------------------------------------------------------- group norm


def render_group_norm(rng: random.Random, dtype: str, style: Style, relu: bool = False) -> Example:
    family = "group_norm_relu" if relu else "group_norm"
    sizes = list(style.pick_name(SIZES_4D))
    x = style.pick_name(X_NAMES, salt=1)
    attr = style.pick(("gn", "group_norm", "norm"), salt=2)
    groups = rng.choice((2, 4))
    per_group = rng.choice((1, 2, 4))
    dims = [rng.choice((2, 4)), groups * per_group, rng.choice((4, 8)), rng.choice((4, 8, 12))]
    constants = list(zip(sizes, dims)) + [("num_groups", groups)]
    own_init, act_line = style.pick(RELU_FORMS, salt=style.phrasing) if relu else ([], "")
    fwd = [f"return self.{attr}({x})"] if not relu else [f"{x} = self.{attr}({x})", act_line.format(x=x)]
    doc = ("Applies group normalisation, then ReLU." if relu else
           "Applies group normalisation over the channels of a 4D input.")
    init_lines = [f"self.{attr} = nn.GroupNorm(num_groups, {sizes[1]})"]
    ref = RefSpec(doc=doc, init_params=[("num_groups", "int"), (sizes[1], "int")],
                  init_lines=init_lines + own_init, forward_args=[x],
                  forward_lines=fwd, constants=constants, inputs=[(x, randn(sizes, dtype))],
                  init_inputs=["num_groups", sizes[1]], forward_doc="a tensor shaped like the input.",
                  imports=["import torch.nn.functional as F"] if any("F." in ln for ln in fwd) else [],
                  arg_docs={sizes[1]: "Number of channels in the input."})
    if style.sizes == "published":  # a program loops over its group: groups and planes grow (channels % groups == 0)
        n, g, per, h, w = scale.draw(rng, [scale.BATCH, (4, 8, 16, 32), (2, 4, 8, 16), scale.SPATIAL, scale.SPATIAL],
                                     cap=scale.INT32_SAFE - 1)
        ref.published = {sizes[0]: n, sizes[1]: g * per, sizes[2]: h, sizes[3]: w, "num_groups": g}
    kname = style.kernel(family)
    b = style.block
    act = "            y = tl.maximum(y, 0.0)\n" if relu else ""
    kernel = f"""
@triton.jit
def {kname}(x_ptr, out_ptr, w_ptr, b_ptr, channels, hw, num_groups, eps, {b}: tl.constexpr):
{comment(style, "one program per (sample, group); a group's elements are contiguous in NCHW")}    pid = tl.program_id(0)
    g = pid % num_groups
    per_group = channels // num_groups
    group_len = per_group * hw
    base = pid * group_len
    offs = tl.arange(0, {b})
    acc = tl.zeros(({b},), dtype=tl.float32)
    for start in range(0, group_len, {b}):
        idx = start + offs
        acc += tl.load(x_ptr + base + idx, mask=idx < group_len, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / group_len
    acc = tl.zeros(({b},), dtype=tl.float32)
    for start in range(0, group_len, {b}):
        idx = start + offs
        v = tl.load(x_ptr + base + idx, mask=idx < group_len, other=0.0).to(tl.float32)
        d = tl.where(idx < group_len, v - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / group_len + eps)
    for start in range(0, group_len, {b}):
        idx = start + offs
        valid = idx < group_len
        c = g * per_group + idx // hw
        v = tl.load(x_ptr + base + idx, mask=valid, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=valid, other=1.0).to(tl.float32)
        bias = tl.load(b_ptr + c, mask=valid, other=0.0).to(tl.float32)
        y = (v - mean) * rstd * w + bias
{act.replace("            ", "        ")}        tl.store(out_ptr + base + idx, y, mask=valid)
"""
    gn = "gn" if style.launcher == "function" else f"self.{attr}"
    launch = [f"{x} = {x}.contiguous()", f"n_batch, channels = {x}.shape[0], {x}.shape[1]",
              f"hw = {x}.numel() // (n_batch * channels)", f"out = torch.empty_like({x})",
              f"group_len = channels // {gn}.num_groups * hw",
              f"{kname}[(n_batch * {gn}.num_groups,)]({x}, out, {gn}.weight, {gn}.bias, channels, hw, {gn}.num_groups,",
              f"    {gn}.eps, {b}=min(triton.next_power_of_2(group_len), 1024))", "return out"]
    if style.launcher == "function":
        fn = style.pick_name(("{}", "triton_{}", "launch_{}"), salt=3).format(family)
        if fn == kname:
            fn = f"launch_{family}"
        helpers = [f"def {fn}({x}, gn):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n"]
        forward = [f"return {fn}({x}, self.{attr})"]
    else:
        helpers, forward = [], launch
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    return make_example(family, ref, sol, style, "group norm fused with ReLU" if relu else doc, dtype,
                        dict(zip(sizes, dims)) | {"num_groups": groups})


# --------------------------------------------------------------------------- conv epilogues


@dataclass
class ConvEpilogue:
    family: str
    doc: str
    ref_lines: Callable[[str], list[str]]  # after `x = self.conv(x)`
    lines: list[str]  # kernel lines from y (conv output + conv bias, fp32) to y
    scalars: list[tuple[str, tuple]] = field(default_factory=list)
    channel_bias: bool = False  # an extra nn.Parameter (C, 1, 1) added after the conv
    conv1d: bool = False
    forms: list = field(default_factory=list)  # other ways to write it: (reference-only init lines, ref_lines)


EPILOGUES = [
    ConvEpilogue("conv2d_bias_relu", "A 2D convolution, a learned per-channel bias, then ReLU.",
                 lambda x: [f"{x} = {x} + self.bias", f"return torch.relu({x})"],
                 ["y = tl.maximum(y + extra, 0.0)"], channel_bias=True,
                 forms=[([], lambda x: [f"return F.relu({x} + self.bias)"]),
                        (["self.relu = nn.ReLU()"], lambda x: [f"{x} = {x} + self.bias", f"return self.relu({x})"])]),
    ConvEpilogue("conv2d_scale_tanh", "A 2D convolution, a constant scale, then tanh.",
                 lambda x: [f"{x} = {x} * self.scale", f"return torch.tanh({x})"],
                 ["y = 2.0 * tl.sigmoid(2.0 * y * scale) - 1.0"], scalars=[("scale", (0.5, 2.0, 1.5))],
                 forms=[([], lambda x: [f"return torch.tanh({x} * self.scale)"]),
                        (["self.tanh = nn.Tanh()"], lambda x: [f"return self.tanh({x} * self.scale)"])]),
    ConvEpilogue("conv2d_hardswish", "A 2D convolution followed by HardSwish.",
                 lambda x: [f"return F.hardswish({x})"],
                 ["y = y * tl.minimum(tl.maximum(y + 3.0, 0.0), 6.0) / 6.0"],
                 forms=[(["self.act = nn.Hardswish()"], lambda x: [f"return self.act({x})"]),
                        ([], lambda x: [f"return {x} * F.relu6({x} + 3) / 6"])]),
    ConvEpilogue("conv2d_add_sigmoid", "A 2D convolution, a constant added, then sigmoid.",
                 lambda x: [f"{x} = {x} + self.add_value", f"return torch.sigmoid({x})"],
                 ["y = tl.sigmoid(y + add_value)"], scalars=[("add_value", (0.5, -0.5, 1.0))],
                 forms=[([], lambda x: [f"return torch.sigmoid({x} + self.add_value)"]),
                        ([], lambda x: [f"return ({x} + self.add_value).sigmoid()"])]),
    ConvEpilogue("conv1d_gelu", "A 1D convolution followed by GELU.", lambda x: [f"return F.gelu({x})"],
                 ["y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))"], conv1d=True,
                 forms=[(["self.gelu = nn.GELU()"], lambda x: [f"return self.gelu({x})"]),
                        ([], lambda x: [f"return torch.nn.functional.gelu({x})"])]),
]


def render_conv_epilogue(ep: ConvEpilogue, rng: random.Random, dtype: str, style: Style) -> Example:
    x = style.pick_name(X_NAMES, salt=1)
    if ep.conv1d:
        sizes = list(style.pick_name([("batch_size", "in_channels", "length"), ("N", "C_in", "L"),
                                      ("batch", "in_channels", "seq_len")]))
        dims = [rng.choice((2, 4)), rng.choice((3, 4)), rng.choice((16, 32, 40))]
    else:
        sizes = list(style.pick_name([("batch_size", "in_channels", "height", "width"), ("N", "C_in", "H", "W"),
                                      ("batch", "in_ch", "h", "w"), ("batch_size", "in_channels", "height", "width"),
                                      ("B", "C_in", "H", "W")]))
        dims = [rng.choice((2, 4)), rng.choice((3, 4)), rng.choice((8, 10, 12)), rng.choice((8, 10, 12))]
    out_ch, k = rng.choice((4, 8, 6)), rng.choice((3, 3, 5)) if not ep.conv1d else rng.choice((3, 5))
    scalars = [(n, rng.choice(ch)) for n, ch in ep.scalars]
    constants = list(zip(sizes, dims)) + [("out_channels", out_ch), ("kernel_size", k)] + scalars
    conv_cls = "nn.Conv1d" if ep.conv1d else "nn.Conv2d"
    init_lines = [f"self.conv = {conv_cls}({sizes[1]}, out_channels, kernel_size)"]
    if ep.channel_bias:
        init_lines.append("self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)")
    init_lines += [f"self.{n} = {n}" for n, _ in scalars]
    own_init, lines = style.pick([([], ep.ref_lines), *ep.forms], salt=style.phrasing)
    fwd = [f"{x} = self.conv({x})"] + lines(x)
    ref = RefSpec(doc=ep.doc, init_params=[(sizes[1], "int"), ("out_channels", "int"), ("kernel_size", "int")]
                  + [(n, "float") for n, _ in scalars], init_lines=init_lines + own_init, forward_args=[x],
                  forward_lines=fwd, constants=constants, inputs=[(x, randn(sizes, dtype))],
                  init_inputs=[sizes[1], "out_channels", "kernel_size"] + [n for n, _ in scalars],
                  forward_doc="the activated convolution output.",
                  imports=["import torch.nn.functional as F"] if any("F." in ln for ln in fwd) else [],
                  arg_docs={sizes[1]: "Number of input channels.", "kernel_size": "Size of the convolution kernel."})
    if style.sizes == "published":  # a flat epilogue: batch, channels and the spatial extent grow
        space = [(1024, 4096, 16384, 65536)] if ep.conv1d else [scale.SPATIAL, scale.SPATIAL]
        names = sizes + ["out_channels"]
        dims_pub = scale.draw(rng, [scale.BATCH, scale.IN_CHANNELS, *space, (16, 32, 64, 128)],
                              fits=lambda d: d[0] * max(d[1], d[-1]) * _prod(d[2:-1]) < scale.INT32_SAFE)
        ref.published = dict(zip(names, dims_pub))
    kname = style.kernel(ep.family.replace("conv2d_", "").replace("conv1d_", "") + "_epilogue")
    b, o, m = style.block, style.offs, style.mask
    bias_in_kernel = style.variant % 2 == 0  # the conv's own bias moves into the epilogue
    args = ["y_ptr", "out_ptr"] + (["conv_bias_ptr"] if bias_in_kernel else []) + (["extra_ptr"] if ep.channel_bias else [])
    args += ["n_elements", "spatial", "channels"] + [n for n, _ in scalars]
    loads = ""
    if bias_in_kernel:
        loads += f"    y += tl.load(conv_bias_ptr + c, mask={m}, other=0.0).to(tl.float32)\n"
    if ep.channel_bias:
        loads += f"    extra = tl.load(extra_ptr + c, mask={m}, other=0.0).to(tl.float32)\n"
    offsets = "\n".join(f"    {ln}" for ln in scale.block_offsets(style, "pid", b, o))
    kernel = f"""
@triton.jit
def {kname}({', '.join(args)}, {b}: tl.constexpr):
{comment(style, "epilogue over the convolution output; channel of a flat index = (index // spatial) % channels")}    pid = tl.program_id(0)
{offsets}
    {m} = {o} < n_elements
    c = ({o} // spatial) % channels
    y = tl.load(y_ptr + {o}, mask={m}, other=0.0).to(tl.float32)
{loads}""" + "".join(f"    {ln}\n" for ln in ep.lines) + f"    tl.store(out_ptr + {o}, y, mask={m})\n"
    fconv = "F.conv1d" if ep.conv1d else "F.conv2d"
    if bias_in_kernel:
        conv_line = (f"y = {fconv}({x}, self.conv.weight, None, self.conv.stride, self.conv.padding, "
                     "self.conv.dilation, self.conv.groups).contiguous()")
    else:
        conv_line = f"y = self.conv({x}).contiguous()"
    in_place = style.variant % 3 == 1
    launch = [conv_line, "out = y" if in_place else "out = torch.empty_like(y)", "n_elements = y.numel()",
              "spatial = y[0, 0].numel()", f"grid = (triton.cdiv(n_elements, {style.block_size}),)"]
    kargs = ["y", "out"] + (["self.conv.bias"] if bias_in_kernel else []) + (["self.bias"] if ep.channel_bias else [])
    kargs += ["n_elements", "spatial", "y.shape[1]"] + [f"self.{n}" for n, _ in scalars]
    launch += [f"{kname}[grid]({', '.join(kargs)}, {b}={style.block_size})", "return out"]
    note = ("# The convolution stays in PyTorch; everything after it runs in one Triton kernel."
            if style.comments else "")
    forward = ([note] if note else []) + launch
    sol = SolSpec(kernels=[kernel], helpers=[], forward_lines=forward, init_lines=None,
                  imports=["import torch.nn.functional as F"] if bias_in_kernel else [])
    return make_example(ep.family, ref, sol, style, f"fused convolution epilogue: {ep.doc[0].lower()}{ep.doc[1:]}",
                        dtype, dict(zip(sizes, dims)) | {"out_channels": out_ch, "kernel_size": k})


def _prod(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def templates() -> list[TemplateInfo]:
    dts = ("float32",)
    out = [TemplateInfo("batch_norm", render_batch_norm, dts),
           TemplateInfo("conv2d_bn_relu", lambda rng, d, s: render_batch_norm(rng, d, s, conv=True), dts),
           TemplateInfo("group_norm", render_group_norm, dts),
           TemplateInfo("group_norm_relu", lambda rng, d, s: render_group_norm(rng, d, s, relu=True), dts)]
    out += [TemplateInfo(e.family, lambda rng, d, s, e=e: render_conv_epilogue(e, rng, d, s), dts) for e in EPILOGUES]
    return out
