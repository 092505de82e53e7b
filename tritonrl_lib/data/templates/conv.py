"""Convolution templates (Level 1): direct convolutions written in Triton, the conv itself included.

A third of KernelBench's Level 1 is convolutions: standard 1D / 2D / 3D (square or asymmetric kernels
and inputs, stride, padding, dilation, groups, bias), transposed 1D / 2D / 3D, depthwise, depthwise-
separable and pointwise (1x1). The Level-1 policy forbids keeping `nn.Conv2d` / `F.conv2d` in
PyTorch, so every solution here keeps the reference's parameters (the same `nn.ConvNd` module, or the
same weight / bias Parameters: the state_dict copies over) and computes with its own kernel:

- one program per (batch, output channel) and block of output positions (any `groups`), or one per
  (batch, block of output channels, block of positions) accumulating an outer product (groups == 1);
- a runtime loop over the input channels of the group, `tl.static_range` over the kernel's offsets,
  masked loads for padding and bounds, fp32 accumulation, the bias added, the output cast back;
- transposed convolutions in gather form: an output position o takes input i = (o + pad - k * dil) /
  stride wherever that divides exactly and lies inside the input.
About half the constructors are KernelBench's, settings with defaults (conv_signature.py).
"""

from __future__ import annotations

import dataclasses
import math
import random

from . import conv_signature, epilogue
from .base import (
    Example,
    RefSpec,
    SolSpec,
    Style,
    TemplateInfo,
    comment,
    make_example,
    randn,
)

# family -> (spatial dims, kind)
KINDS = {"conv1d": (1, "standard"), "conv2d": (2, "standard"), "conv3d": (3, "standard"),
         "conv_transpose1d": (1, "transposed"), "conv_transpose2d": (2, "transposed"),
         "conv_transpose3d": (3, "transposed"), "conv_depthwise2d": (2, "depthwise"),
         "conv_pointwise2d": (2, "pointwise"), "conv_depthwise_separable2d": (2, "separable")}
# the Level-2 convolutions' names (epilogue.py), the first ones the most often
CHANNEL_NAMES = [*epilogue.CHANNEL_NAMES, epilogue.CHANNEL_NAMES[0]]
SPATIAL_NAMES = {nd: [*names, names[0]] for nd, names in epilogue.SPATIAL_NAMES.items()}
SUFFIX = {1: ("l",), 2: ("h", "w"), 3: ("d", "h", "w")}
X_NAMES = ("x", "x", "inp", "input_tensor", "x")
MAX_PUBLISHED = 300_000_000  # elements of a published input or output (a prompt's sizes, never run here)
BLOCK_CAP = (128, 256, 256, 512)


@dataclasses.dataclass(frozen=True)
class Setup:
    nd: int
    kind: str  # standard | transposed | depthwise | pointwise | separable
    kernel: tuple[int, ...]  # per dim
    stride: int
    padding: int
    dilation: int
    groups: int
    out_pad: int
    bias: bool

    @property
    def transposed(self) -> bool:
        return self.kind == "transposed"


def out_size(s: int, k: int, su: Setup) -> int:
    if su.transposed:
        return (s - 1) * su.stride - 2 * su.padding + su.dilation * (k - 1) + su.out_pad + 1
    return (s + 2 * su.padding - su.dilation * (k - 1) - 1) // su.stride + 1


def draw_setup(rng: random.Random, nd: int, kind: str) -> Setup:
    if kind == "pointwise":
        return Setup(nd, kind, (1,) * nd, 1, 0, 1, 1, 0, rng.random() < 0.5)
    if nd == 3:
        k = rng.choice((2, 3, 3))
        kernel = (k, k, k) if rng.random() < 0.7 else (rng.choice((1, 2, 3)), 3, rng.choice((2, 3)))
    elif nd == 2:
        k = rng.choice((3, 3, 5, 2, 4) if kind != "transposed" else (3, 3, 2, 4))
        kernel = (k, k) if rng.random() < 0.65 else (rng.choice((1, 2, 3)), rng.choice((3, 5)))
    else:
        kernel = (rng.choice((3, 3, 5, 2, 7)),)
    stride = rng.choice((1, 1, 2, 2, 3) if kind in ("standard", "depthwise") and nd < 3 or nd == 1 else (1, 1, 2))
    dilation = rng.choice((1, 1, 1, 2)) if not (nd == 3 and kind == "transposed") else 1
    padding = rng.choice((0, 0, 1, 2)) if max(kernel) > 1 else 0
    if kind == "transposed":
        padding = min(padding, dilation * (min(kernel) - 1))  # keeps every output size positive
    out_pad = 1 if kind == "transposed" and stride > 1 and rng.random() < 0.3 else 0
    groups = rng.choice((1, 1, 1, 2, 4)) if kind in ("standard", "transposed") else 1
    bias = rng.random() < (0.5 if kind != "separable" else 0.3)
    return Setup(nd, kind, kernel, stride, padding, dilation, groups, out_pad, bias)


def _ntuple_helper() -> str:
    return """
def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
"""


# --------------------------------------------------------------------------- the kernel


def _kernel_source(name: str, nd: int, transposed: bool, tile: bool, style: Style) -> str:
    """A direct (or, `transposed`, gather-form transposed) convolution over `nd` spatial dims; `tile`:
    a block of output channels per program (groups == 1), else one output channel per program."""
    sfx = SUFFIX[nd]
    b = style.block
    xp, wp, bp, op = style.ptr("x"), style.ptr("w"), style.ptr("bias"), style.ptr("out")
    offs, mask, numel = style.offs, style.mask, style.numel
    in_sizes = [f"in_{s}" for s in sfx]
    out_sizes = [f"out_{s}" for s in sfx]
    consts = []
    for s in sfx:
        u = s.upper()
        consts += [f"K_{u}: tl.constexpr", f"STRIDE_{u}: tl.constexpr", f"PAD_{u}: tl.constexpr",
                   f"DIL_{u}: tl.constexpr"]
    args = [xp, wp, bp, op, "C_in", "C_out", *in_sizes, *out_sizes]
    args += ["cin_per_group", "cout_per_group"] if not tile else []
    args += [*consts, "HAS_BIAS: tl.constexpr", f"{b}: tl.constexpr"] + (["BLOCK_CO: tl.constexpr"] if tile else [])
    i64 = ".to(tl.int64)" if style.int64 else ""
    ksize = " * ".join(f"K_{s.upper()}" for s in sfx)
    lines = ["@triton.jit", f"def {name}("]
    arg_lines, cur = [], "    "
    for a in args:
        if len(cur) + len(a) > 96:
            arg_lines.append(cur.rstrip())
            cur = "    "
        cur += a + ", "
    arg_lines.append(cur.rstrip().rstrip(","))
    lines += arg_lines + ["):"]
    body: list[str] = []
    if tile:
        body.append(comment(style, "program (batch, channel block, position block): BLOCK_CO output channels x "
                                   f"{b} output positions").rstrip("\n"))
        body += ["bi = tl.program_id(0)", "co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)",
                 "co_ok = co < C_out", f"{style.pid} = tl.program_id(2)"]
    else:
        body.append(comment(style, f"program (batch * C_out + co, position block): one output channel, {b} positions")
                    .rstrip("\n"))
        body += [f"{style.pid} = tl.program_id(0)", f"bi = {style.pid} // C_out", f"co = {style.pid} % C_out",
                 "g = co // cout_per_group"]
    pid_pos = style.pid if tile else "tl.program_id(1)"
    body += [f"{numel} = {' * '.join(out_sizes)}", f"{offs} = {pid_pos} * {b} + tl.arange(0, {b})",
             f"{mask} = {offs} < {numel}"]
    # position of each output element along every spatial dim
    rest = offs
    for i, s in reversed(list(enumerate(sfx))):
        if i == 0:
            body.append(f"o_{s} = {rest}" if nd > 1 else f"o_{s} = {offs}")
        elif i == nd - 1:
            body.append(f"o_{s} = {offs} % out_{s}")
            rest = f"({offs} // out_{s})"
        else:
            body.append(f"o_{s} = {rest} % out_{s}")
            rest = f"({offs} // ({' * '.join(f'out_{t}' for t in sfx[i:])}))"
    in_vol = " * ".join(in_sizes)
    if tile:
        body.append(f"acc = tl.zeros((BLOCK_CO, {b}), dtype=tl.float32)")
        body.append("for c in range(C_in):")
        plane = f"(bi * C_in + c){i64}"
        wbase = f"(c * C_out + co) * ({ksize})" if transposed else f"(co * C_in + c) * ({ksize})"
    else:
        body.append(f"acc = tl.zeros(({b},), dtype=tl.float32)")
        body.append("for ci in range(cin_per_group):")
        body.append("    c = g * cin_per_group + ci")
        plane = f"(bi * C_in + c){i64}"
        wbase = (f"(c * cout_per_group + co % cout_per_group) * ({ksize})" if transposed
                 else f"(co * cin_per_group + ci) * ({ksize})")
    body.append(f"    x_base = {xp} + {plane} * ({in_vol})")
    body.append(f"    w_base = {wp} + {wbase}")
    ind = "    "
    conds = []
    for s in sfx:
        u = s.upper()
        body.append(f"{ind}for k_{s} in tl.static_range(K_{u}):")
        ind += "    "
        if transposed:
            body.append(f"{ind}t_{s} = o_{s} + PAD_{u} - k_{s} * DIL_{u}")
            body.append(f"{ind}i_{s} = t_{s} // STRIDE_{u}")
            body.append(f"{ind}ok_{s} = (t_{s} >= 0) & (t_{s} % STRIDE_{u} == 0) & (i_{s} < in_{s})")
        else:
            body.append(f"{ind}i_{s} = o_{s} * STRIDE_{u} - PAD_{u} + k_{s} * DIL_{u}")
            body.append(f"{ind}ok_{s} = (i_{s} >= 0) & (i_{s} < in_{s})")
        conds.append(f"ok_{s}")
    idx = f"i_{sfx[0]}"
    for s in sfx[1:]:
        idx = f"({idx}) * in_{s} + i_{s}" if "*" in idx or "+" in idx else f"{idx} * in_{s} + i_{s}"
    kidx = f"k_{sfx[0]}"
    for s in sfx[1:]:
        kidx = f"({kidx}) * K_{s.upper()} + k_{s}" if "+" in kidx else f"{kidx} * K_{s.upper()} + k_{s}"
    body.append(f"{ind}ld_mask = {mask} & {' & '.join(conds)}")
    body.append(f"{ind}xv = tl.load(x_base + {idx}, mask=ld_mask, other=0.0).to(tl.float32)")
    if tile:
        body.append(f"{ind}wv = tl.load(w_base + {kidx}, mask=co_ok, other=0.0).to(tl.float32)")
        body.append(f"{ind}acc += wv[:, None] * xv[None, :]")
        body += ["if HAS_BIAS:", f"    acc += tl.load({bp} + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]"]
        body.append(f"out_offs = (bi * C_out + co){i64}[:, None] * {numel} + {offs}[None, :]")
        body.append(f"tl.store({op} + out_offs, acc.to({op}.dtype.element_ty), "
                    f"mask=co_ok[:, None] & {mask}[None, :])")
    else:
        body.append(f"{ind}wv = tl.load(w_base + {kidx}).to(tl.float32)")
        body.append(f"{ind}acc += xv * wv")
        body += ["if HAS_BIAS:", f"    acc += tl.load({bp} + co).to(tl.float32)"]
        body.append(f"tl.store({op} + {style.pid}{i64} * {numel} + {offs}, acc.to({op}.dtype.element_ty), "
                    f"mask={mask})")
    return "\n".join(lines + [f"    {ln}" if ln and not ln.startswith("    #") else ln for ln in body if ln]) + "\n"


def _launcher_lines(nd: int, transposed: bool, tile: bool, kname: str, x: str, style: Style,
                    block_cap: int) -> list[str]:
    """The body of `launch(x, weight, bias, stride, padding, dilation, groups[, output_padding])`."""
    sfx = SUFFIX[nd]
    b = style.block
    lines = [f"{x} = {x}.contiguous()", "weight = weight.contiguous()", f"batch, c_in = {x}.shape[0], {x}.shape[1]",
             f"{', '.join(f'in_{s}' for s in sfx)}{',' if nd == 1 else ''} = {x}.shape[2:]",
             f"{', '.join(f'k_{s}' for s in sfx)}{',' if nd == 1 else ''} = weight.shape[2:]"]
    for what in ("stride", "padding", "dilation") + (("output_padding",) if transposed else ()):
        short = {"stride": "stride", "padding": "pad", "dilation": "dil", "output_padding": "opad"}[what]
        names = ", ".join(f"{short}_{s}" for s in sfx) + ("," if nd == 1 else "")
        lines.append(f"{names} = _ntuple({what}, {nd})")
    if transposed:
        lines.append("c_out = weight.shape[1] * groups")
        for s in sfx:
            lines.append(f"out_{s} = (in_{s} - 1) * stride_{s} - 2 * pad_{s} + dil_{s} * (k_{s} - 1) + opad_{s} + 1")
    else:
        lines.append("c_out = weight.shape[0]")
        for s in sfx:
            lines.append(f"out_{s} = (in_{s} + 2 * pad_{s} - dil_{s} * (k_{s} - 1) - 1) // stride_{s} + 1")
    outs = ", ".join(f"out_{s}" for s in sfx)
    lines.append(f"out = torch.empty((batch, c_out, {outs}), device={x}.device, dtype={x}.dtype)")
    lines.append(f"n_out = {' * '.join(f'out_{s}' for s in sfx)}")
    lines.append(f"{b} = min(triton.next_power_of_2(n_out), {block_cap})")
    if tile:
        lines.append("BLOCK_CO = min(triton.next_power_of_2(c_out), 16)")
        dims = "batch, triton.cdiv(c_out, BLOCK_CO)"
    else:
        dims = "batch * c_out"
    if style.grid == "lambda":
        lines.append(f'grid = lambda meta: ({dims}, triton.cdiv(n_out, meta["{b}"]))')
    else:
        lines.append(f"grid = ({dims}, triton.cdiv(n_out, {b}))")
    call = [f"{x}, weight, bias if bias is not None else weight, out, c_in, c_out",
            ", ".join(f"in_{s}" for s in sfx), outs]
    if not tile:
        call.append("c_in // groups, c_out // groups")
    kw = []
    for s in sfx:
        u = s.upper()
        kw.append(f"K_{u}=k_{s}, STRIDE_{u}=stride_{s}, PAD_{u}=pad_{s}, DIL_{u}=dil_{s}")
    kw.append(f"HAS_BIAS=bias is not None, {b}={b}" + (", BLOCK_CO=BLOCK_CO" if tile else ""))
    lines.append(f"{kname}[grid](")
    lines += [f"    {c}," for c in call]
    lines += [f"    {k}," for k in kw[:-1]] + [f"    {kw[-1]})"]
    lines.append("return out")
    return lines


# --------------------------------------------------------------------------- the reference


def render_conv(family: str, rng: random.Random, dtype: str, style: Style) -> Example:
    nd, kind = KINDS[family]
    su = draw_setup(rng, nd, kind)
    kb_ctor, su = conv_signature.draw_kind(rng, su)  # KernelBench's constructor: settings with defaults
    bn, cin, cout = style.pick_name(CHANNEL_NAMES)
    spatial = style.pick_name(SPATIAL_NAMES[nd], salt=5)
    x = style.pick_name(X_NAMES, salt=1)
    # verified sizes: small enough for the interpreter; channels and planes' sides <= 8, which the verifier's
    # tiny set keeps as they are (it doubles sides of 9-16)
    g = su.groups
    c_in = rng.choice((3, 4, 6, 8)) if g == 1 else g * rng.choice((1, 2))
    c_out = rng.choice((4, 6, 8)) if g == 1 else g * rng.choice((1, 2))
    if kind in ("depthwise", "separable"):
        c_in = rng.choice((3, 4, 6, 8))
        c_out = c_in if kind == "depthwise" else rng.choice((4, 6, 8))
    span = [su.dilation * (k - 1) + 1 for k in su.kernel]
    if nd == 1:
        sizes = [max(rng.choice((20, 24, 32, 40)), span[0])]
    elif nd == 2:
        pool = (4, 5, 6, 7) if kind == "transposed" else (6, 7, 8, 8)
        sizes = [max(rng.choice(pool), s) for s in span]
    else:
        pool = (3, 4) if kind == "transposed" else (5, 6, 7)
        sizes = [max(rng.choice(pool), s) for s in span]
    batch = rng.choice((2, 2, 3)) if nd < 3 else 2
    if nd == 3:  # the interpreter pays per kernel offset: fewer channels
        c_in = rng.choice((2, 3, 4)) if g == 1 else g
        c_out = rng.choice((2, 4)) if g == 1 else g
    depthwise_like = kind in ("depthwise", "separable")

    constants: list[tuple[str, object]] = [(bn, batch), (cin, c_in)]
    init_params: list[tuple[str, str]] = [(cin, "int")]
    init_inputs = [cin]
    if kind != "depthwise":
        constants.append((cout, c_out))
        init_params.append((cout, "int"))
        init_inputs.append(cout)
    constants += list(zip(spatial, sizes))
    kval = su.kernel[0] if len(set(su.kernel)) == 1 else su.kernel
    if kind != "pointwise":
        constants.append(("kernel_size", kval))
        init_params.append(("kernel_size", "int" if isinstance(kval, int) else "tuple"))
        init_inputs.append("kernel_size")
    as_constants = rng.random() < 0.6
    module_form = kind == "separable" or style.variant % 3 != 1  # nn.ConvNd: KernelBench's usual form
    settings = [("stride", su.stride, 1), ("padding", su.padding, 0), ("dilation", su.dilation, 1)]
    if su.transposed:
        settings.append(("output_padding", su.out_pad, 0))
    if kind in ("standard", "transposed"):
        settings.append(("groups", su.groups, 1))
    exprs: dict[str, str] = {"groups": "1"}  # setting -> how the reference's forward / constructor refers to it
    kwargs: list[str] = []
    store: list[str] = []
    ctor = conv_signature.draw_ctor(rng, su, not isinstance(kval, int)) if kb_ctor else None
    if ctor is not None:  # KernelBench's: the signature's settings passed on by name, the others at their defaults
        init_params += ctor.params
        init_inputs += [n for n, _ in ctor.passed]
        constants += ctor.passed
        kwargs, exprs, store = ctor.forms(settings)
    else:
        for name, value, default in settings:
            if value == default:
                exprs[name] = repr(default)
            elif as_constants:
                constants.append((name, value))
                init_params.append((name, "int"))
                init_inputs.append(name)
                kwargs.append(f"{name}={name}")
                exprs[name] = name
                store.append(f"self.{name} = {name}")
            else:
                kwargs.append(f"{name}={value}")
                exprs[name] = repr(value)
        if not su.bias:
            kwargs.append("bias=False")
    if depthwise_like:
        exprs["groups"] = cin
    bias_kw = [k for k in kwargs if k.startswith("bias=")]

    transposed = su.transposed
    cls = f"nn.ConvTranspose{nd}d" if transposed else f"nn.Conv{nd}d"
    attr = style.pick(("conv_transpose", "conv_t", f"conv_transpose{nd}d", "deconv") if transposed else
                      ("conv", f"conv{nd}d", "conv", "conv_layer"), salt=2)
    if kind == "depthwise":
        attr = style.pick(("depthwise", "conv", "dw_conv"), salt=2)
    if kind == "pointwise":
        attr = style.pick(("pointwise", "conv", "conv1x1"), salt=2)
    imports: list[str] = []
    sol_imports: list[str] = []
    launch_args = ["stride", "padding", "dilation"] + (["output_padding"] if transposed else []) + ["groups"]
    if kind == "separable":
        dw, pw = style.pick((("depthwise", "pointwise"), ("dw", "pw"), ("conv_dw", "conv_pw")), salt=3)
        dw_kwargs = [k for k in kwargs if not k.startswith("bias")]
        init_lines = [f"self.{dw} = nn.Conv2d({', '.join([cin, cin, 'kernel_size', *dw_kwargs, f'groups={cin}', *bias_kw])})",
                      f"self.{pw} = nn.Conv2d({', '.join([cin, cout, '1', *bias_kw])})"]
        fwd = [f"{x} = self.{dw}({x})", f"{x} = self.{pw}({x})", f"return {x}"]
        calls = [[f"self.{m}.{a}" for a in launch_args] for m in (dw, pw)]
        weights = [(f"self.{dw}.weight", f"self.{dw}.bias"), (f"self.{pw}.weight", f"self.{pw}.bias")]
        sol_init = None
    elif module_form:
        args = [cin, cin if kind == "depthwise" else cout, "kernel_size" if kind != "pointwise" else "1", *kwargs]
        if depthwise_like:
            args.insert(len(args) - len(bias_kw), f"groups={cin}")
        init_lines = [f"self.{attr} = {cls}({', '.join(args)})"]
        fwd = [f"return self.{attr}({x})"]
        calls = [[f"self.{attr}.{a}" for a in launch_args]]
        weights = [(f"self.{attr}.weight", f"self.{attr}.bias")]
        sol_init = None
    else:
        imports = ["import torch.nn.functional as F"]
        co_e = cin if kind == "depthwise" else cout
        if kind == "depthwise":
            store.append(f"self.groups = {cin}")
            exprs["groups"] = "groups"
        groups_e = exprs["groups"]
        per_group = ((lambda c: c) if groups_e == "1" else (lambda c: "1") if kind == "depthwise"
                     else (lambda c: f"{c} // {groups_e}"))
        if kind == "pointwise":
            kdims = ["1", "1"]
        elif isinstance(kval, int):
            kdims = ["kernel_size"] * nd
        else:
            kdims = ["*kernel_size"]
        wshape = [cin, per_group(co_e)] if transposed else [co_e, per_group(cin)]
        init_lines = [f"self.weight = nn.Parameter(torch.randn({', '.join(wshape + kdims)}) * 0.1)"]
        if ctor is not None:
            init_lines.append(f"self.bias = nn.Parameter(torch.randn({co_e}) * 0.1) if bias else None")
        else:
            init_lines.append(f"self.bias = nn.Parameter(torch.randn({co_e}) * 0.1)" if su.bias else "self.bias = None")
        init_lines += store
        fn = f"F.conv_transpose{nd}d" if transposed else f"F.conv{nd}d"
        fexprs = {k: (f"self.{v}" if v in dict(init_params) or k == v else v) for k, v in exprs.items()}
        fkw = [f"{k}={fexprs[k]}" for k in ("stride", "padding") + (("output_padding",) if transposed else ())
               + (("groups", "dilation") if transposed else ("dilation", "groups"))
               if fexprs[k] != repr({"padding": 0, "output_padding": 0}.get(k, 1))]
        fwd = [f"return {fn}({', '.join([x, 'self.weight', 'self.bias', *fkw])})"]
        calls = [[fexprs[a] for a in launch_args]]
        weights = [("self.weight", "self.bias")]
        sol_init = None

    what = {"standard": f"{nd}D convolution", "transposed": f"{nd}D transposed convolution",
            "depthwise": "depthwise 2D convolution", "pointwise": "pointwise (1x1) 2D convolution",
            "separable": "depthwise-separable 2D convolution (depthwise, then pointwise)"}[kind]
    extras = []
    if not isinstance(kval, int):
        extras.append("an asymmetric kernel")
    elif kind != "pointwise":
        extras.append("a square kernel" if nd > 1 else f"a kernel of {kval}")
    for name, value, default in settings:
        if value != default:
            extras.append(f"{name.replace('_', ' ')} {value}")
    if not su.bias:
        extras.append("no bias")
    if not extras:
        doc = f"A {what}."
    else:
        doc = f"A {what} with {', '.join(extras[:-1]) + ' and ' + extras[-1] if len(extras) > 1 else extras[0]}."
    arg_docs = {cin: "Number of input channels.", cout: "Number of output channels.",
                "kernel_size": "Size of the convolution kernel.", "stride": "Stride of the convolution.",
                "padding": "Implicit zero padding on every side.", "dilation": "Spacing between kernel elements.",
                "groups": "Number of blocked connections from input to output channels.",
                "output_padding": "Extra size added to one side of each output dimension.",
                "bias": "If True, adds a learnable bias to the output."}
    ref = RefSpec(doc=doc, init_params=init_params, init_lines=init_lines, forward_args=[x], forward_lines=fwd,
                  constants=constants, inputs=[(x, randn([bn, cin, *spatial], dtype))], init_inputs=init_inputs,
                  forward_doc=f"the output of the {what.split(' (')[0]}.", imports=imports, arg_docs=arg_docs,
                  init_defaults=ctor.defaults if ctor is not None else {})
    if style.sizes == "published":
        ref.published = _published(rng, su, bn, cin, cout, spatial, kind)

    # ---- the solution
    tile = kind == "pointwise" or (su.groups == 1 and not depthwise_like and style.variant % 2 == 1)
    if kind == "separable":
        tile = False  # one kernel, launched for the depthwise and the pointwise layer (groups differ)
    kname = style.kernel(family)
    block_cap = style.pick(BLOCK_CAP, salt=4)
    kernel = _kernel_source(kname, nd, transposed, tile, style)
    launch = _launcher_lines(nd, transposed, tile, kname, x, style, block_cap)
    params = ["weight", "bias"] + launch_args
    inline = style.launcher == "inline" and kind != "separable"
    helpers = [_ntuple_helper()]
    if inline:
        w_e, b_e = weights[0]
        forward = [f"weight, bias = {w_e}, {b_e}"]
        forward += [f"{a} = {e}" for a, e in zip(launch_args, calls[0])]
        forward += launch
    else:
        fname = style.pick_name(("{}", "triton_{}", "launch_{}", "{}_triton"), salt=3).format(family)
        if fname == kname:
            fname = f"launch_{family}"
        helpers.append(f"def {fname}({x}, {', '.join(params)}):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n")
        forward = []
        for i, ((w_e, b_e), c) in enumerate(zip(weights, calls)):
            src = x if i == 0 else "y"
            head = f"{'y = ' if i < len(calls) - 1 else 'return '}{fname}("
            call = f"{head}{src}, {w_e}, {b_e}, {', '.join(c)})"
            if len(call) > 100:
                call = f"{head}\n    {src}, {w_e}, {b_e},\n    {', '.join(c)},\n)"
            forward += call.split("\n")
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=sol_init, imports=sol_imports)
    shape = dict(constants)
    return make_example(family, ref, sol, style, ref.doc, dtype, shape)


def _published(rng: random.Random, su: Setup, bn: str, cin: str, cout: str, spatial: tuple[str, ...],
               kind: str) -> dict[str, object]:
    """KernelBench-like sizes for the prompt; input and output each under MAX_PUBLISHED elements."""
    nd = su.nd
    spatial_pool = {1: (512, 1024, 4096, 16384, 65536), 2: (64, 128, 128, 256), 3: (16, 32, 32, 48, 64)}[nd]
    if su.transposed:
        spatial_pool = {1: (256, 512, 1024, 4096), 2: (32, 64, 64, 128), 3: (8, 16, 16, 32)}[nd]
    g = su.groups
    for _ in range(40):
        batch = rng.choice((8, 16, 16, 32))
        c_in = rng.choice((3, 16, 32, 64) if g == 1 else (16, 32, 64))
        c_out = rng.choice((64, 64, 128, 256) if kind != "depthwise" else (c_in,))
        if kind == "depthwise":
            c_in = c_out = rng.choice((16, 32, 64, 128))
        sizes = [rng.choice(spatial_pool) for _ in spatial]
        if rng.random() < 0.3 and nd > 1:  # an asymmetric input
            sizes[-1] *= 2
        outs = [out_size(s, k, su) for s, k in zip(sizes, su.kernel)]
        if kind == "separable":
            outs = [(s + 2 * su.padding - su.dilation * (k - 1) - 1) // su.stride + 1 for s, k in zip(sizes, su.kernel)]
        if min(outs) < 1 or c_in % g or c_out % g:
            continue
        if batch * c_in * math.prod(sizes) <= MAX_PUBLISHED and batch * c_out * math.prod(outs) <= MAX_PUBLISHED:
            out = {bn: batch, cin: c_in, **dict(zip(spatial, sizes))}
            if kind != "depthwise":
                out[cout] = c_out
            return out
    return {}


def templates() -> list[TemplateInfo]:
    # learned weights: the reference runs in fp32 (as the Level-2 convolution templates do)
    return [TemplateInfo(f, lambda rng, d, s, f=f: render_conv(f, rng, d, s), ("float32",)) for f in KINDS]
