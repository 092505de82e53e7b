"""Pooling templates: max / average pooling in 1D and 2D (no padding, any stride).

One program per (batch, channel) plane and block of output positions; the window is walked by a
loop over its offsets with masked loads, the running max (or sum) kept in fp32.
"""

from __future__ import annotations

import random

from . import scale
from .base import Example, RefSpec, SolSpec, Style, TemplateInfo, comment, make_example, randn

SIZES_1D = [("batch_size", "channels", "length"), ("N", "C", "L"), ("batch", "features", "seq_len"),
            ("batch_size", "features", "sequence_length"), ("batch_size", "in_channels", "input_length")]
SIZES_2D = [("batch_size", "channels", "height", "width"), ("N", "C", "H", "W"), ("batch", "features", "h", "w"),
            ("batch_size", "channels", "dim1", "dim2"), ("B", "C", "H", "W")]
X_NAMES = ("x", "x", "inp", "input_tensor", "input", "X", "x")


def render_pool(kind: str, ndim: int, rng: random.Random, dtype: str, style: Style) -> Example:
    family = f"{kind}_pool{ndim}d"
    sizes = style.pick_name(SIZES_1D if ndim == 1 else SIZES_2D)
    x = style.pick_name(X_NAMES, salt=1)
    k = rng.choice((2, 3, 4))
    stride = rng.choice((1, 2, k))
    if ndim == 1:
        dims = [2, rng.choice((2, 3, 4)), rng.choice((16, 32, 50, 64))]
    else:
        dims = [2, rng.choice((2, 3)), rng.choice((8, 10, 12)), rng.choice((8, 10, 12))]
    constants = list(zip(sizes, dims)) + [("kernel_size", k), ("stride", stride)]
    mod = {("max", 1): "MaxPool1d", ("max", 2): "MaxPool2d", ("avg", 1): "AvgPool1d", ("avg", 2): "AvgPool2d"}[kind, ndim]
    fn = f"F.{kind}_pool{ndim}d"
    attr = style.pick(("pool", "pooling", f"{kind}pool", f"{kind}_pool"), salt=2)
    as_module = style.variant % 2 == 0
    if as_module:
        init_lines = [f"self.{attr} = nn.{mod}(kernel_size=kernel_size, stride=stride)"]
        fwd = [f"return self.{attr}({x})"]
        sol_init = ["self.kernel_size = kernel_size", "self.stride = stride"]
    else:
        init_lines = ["self.kernel_size = kernel_size", "self.stride = stride"]
        fwd = [f"return {fn}({x}, kernel_size=self.kernel_size, stride=self.stride)"]
        sol_init = init_lines
    what = "maximum" if kind == "max" else "average"
    ref = RefSpec(doc=f"{'Max' if kind == 'max' else 'Average'} pooling over {'the last dimension' if ndim == 1 else 'height and width'}.",
                  init_params=[("kernel_size", "int"), ("stride", "int")], init_lines=init_lines, forward_args=[x],
                  forward_lines=fwd, constants=constants, inputs=[(x, randn(list(sizes), dtype))],
                  init_inputs=["kernel_size", "stride"], forward_doc=f"the {what} of each window.",
                  imports=[] if as_module else ["import torch.nn.functional as F"],
                  arg_docs={"kernel_size": "Size of the pooling window.", "stride": "Stride of the pooling window."})
    if style.sizes == "published":  # BLOCK spans a plane's outputs: the plane stays small, batch and channels grow
        plane = [(1024, 2048, 4096)] if ndim == 1 else [scale.SMALL_PLANE, scale.SMALL_PLANE]
        ref.published = dict(zip(sizes, scale.draw(rng, [scale.BATCH, (16, 32, 64, 128), *plane],
                                                   cap=scale.INT32_SAFE - 1)))

    kname = style.kernel(family)
    xp, op, b = style.ptr(x), style.ptr("out"), style.block
    init = "tl.full((BLOCK,), float(\"-inf\"), tl.float32)" if kind == "max" else "tl.zeros((BLOCK,), dtype=tl.float32)"
    init = init.replace("BLOCK", b)
    other = '-float("inf")' if kind == "max" else "0.0"
    update = "acc = tl.maximum(acc, v)" if kind == "max" else "acc += v"
    final = "" if kind == "max" else "    acc = acc / (KERNEL * KERNEL)\n" if ndim == 2 else "    acc = acc / KERNEL\n"
    if ndim == 1:
        kernel = f"""
@triton.jit
def {kname}({xp}, {op}, length, out_len, stride, KERNEL: tl.constexpr, {b}: tl.constexpr):
{comment(style, "program (plane, block): one (batch, channel) row, BLOCK output positions")}    plane = tl.program_id(0)
    pos = tl.program_id(1) * {b} + tl.arange(0, {b})
    valid = pos < out_len
    start = pos * stride
    acc = {init}
    for j in tl.static_range(KERNEL):
        v = tl.load({xp} + plane * length + start + j, mask=valid, other={other}).to(tl.float32)
        {update}
{final}    tl.store({op} + plane * out_len + pos, acc, mask=valid)
"""
        launch = [f"{x} = {x}.contiguous()", f"n, c, length = {x}.shape", "out_len = (length - kernel_size) // stride + 1",
                  f"out = torch.empty((n, c, out_len), device={x}.device, dtype={x}.dtype)",
                  f"{b} = triton.next_power_of_2(out_len)",
                  f"{kname}[(n * c, triton.cdiv(out_len, {b}))]({x}, out, length, out_len, stride, KERNEL=kernel_size, {b}={b})",
                  "return out"]
    else:
        kernel = f"""
@triton.jit
def {kname}({xp}, {op}, height, width, out_h, out_w, stride, KERNEL: tl.constexpr, {b}: tl.constexpr):
{comment(style, "program (plane, block): one (batch, channel) image, BLOCK flattened output pixels")}    plane = tl.program_id(0)
    pix = tl.program_id(1) * {b} + tl.arange(0, {b})
    valid = pix < out_h * out_w
    oh = pix // out_w
    ow = pix % out_w
    base = {xp} + plane * height * width
    acc = {init}
    for i in tl.static_range(KERNEL):
        for j in tl.static_range(KERNEL):
            v = tl.load(base + (oh * stride + i) * width + ow * stride + j, mask=valid, other={other}).to(tl.float32)
            {update}
{final}    tl.store({op} + plane * out_h * out_w + pix, acc, mask=valid)
"""
        launch = [f"{x} = {x}.contiguous()", f"n, c, height, width = {x}.shape",
                  "out_h = (height - kernel_size) // stride + 1", "out_w = (width - kernel_size) // stride + 1",
                  f"out = torch.empty((n, c, out_h, out_w), device={x}.device, dtype={x}.dtype)",
                  f"{b} = triton.next_power_of_2(out_h * out_w)",
                  f"grid = (n * c, triton.cdiv(out_h * out_w, {b}))",
                  f"{kname}[grid]({x}, out, height, width, out_h, out_w, stride, KERNEL=kernel_size, {b}={b})",
                  "return out"]
    if style.launcher == "inline":
        forward = ["kernel_size, stride = self.kernel_size, self.stride"] + launch
        helpers = []
    else:
        fname = style.pick_name(("{}", "triton_{}", "launch_{}"), salt=3).format(family)
        if fname == kname:
            fname = f"launch_{family}"
        helpers = [f"def {fname}({x}, kernel_size, stride):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n"]
        forward = [f"return {fname}({x}, self.kernel_size, self.stride)"]
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=sol_init)
    shape = dict(zip(sizes, dims)) | {"kernel_size": k, "stride": stride}
    return make_example(family, ref, sol, style, ref.doc, dtype, shape)


def templates() -> list[TemplateInfo]:
    return [TemplateInfo(f"{kind}_pool{nd}d", lambda rng, d, s, kind=kind, nd=nd: render_pool(kind, nd, rng, d, s),
                         ("float32", "float16"))
            for kind in ("max", "avg") for nd in (1, 2)]
