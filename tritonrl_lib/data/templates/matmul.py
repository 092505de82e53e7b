"""Matmul templates: Level-1 matmul variants, Level-2 GEMM epilogues and matmul + residual.

The tiled kernel follows Triton tutorial 03: a BLOCK_M x BLOCK_N tile of the output per program, a
loop over K in BLOCK_K steps with masked loads, an fp32 accumulator, an epilogue applied to the
accumulator before the single store. Operands are read through strides, so `B.T` or an
nn.Linear weight (stored (out, in)) needs no copy. fp32 operands use tf32x3 so GPU results stay
within fp32 tolerances.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

from . import scale
from .base import Example, RefSpec, SolSpec, Style, TemplateInfo, comment, make_example, randn

MNK = (16, 24, 32, 48)
BLOCKS = (16, 32)


def _dot(style: Style) -> list[str]:
    return ["if a.dtype == tl.float32:",
            "    acc = tl.dot(a, b, acc, input_precision=\"tf32x3\")",
            "else:",
            "    acc = tl.dot(a, b, acc)"]


def matmul_kernel(name: str, style: Style, epilogue: list[str], extra_args: list[str], batched: bool = False,
                  grouped: bool = False, note: str = "") -> str:
    """A tiled matmul kernel; `epilogue` lines transform `acc` (with offs_m / offs_n in scope)."""
    a, b, c = style.ptr("a"), style.ptr("b"), style.ptr("c")
    strides = ["stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
    if batched:
        strides = ["stride_ab", *strides[:2], "stride_bb", *strides[2:4], "stride_cb", *strides[4:]]
    args = [a, b, c, "M", "N", "K", *strides, *extra_args]
    consts = ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr"]
    if grouped:
        consts.append("GROUP_M: tl.constexpr")
    lines: list[str] = []
    if grouped:
        lines += ["pid = tl.program_id(axis=0)",
                  "num_pid_m = tl.cdiv(M, BLOCK_M)",
                  "num_pid_n = tl.cdiv(N, BLOCK_N)",
                  "group_size = GROUP_M * num_pid_n",
                  "first_m = (pid // group_size) * GROUP_M",
                  "rows_in_group = min(num_pid_m - first_m, GROUP_M)",
                  "pid_m = first_m + (pid % group_size) % rows_in_group",
                  "pid_n = (pid % group_size) // rows_in_group"]
    else:
        lines += ["pid_m = tl.program_id(axis=0)", "pid_n = tl.program_id(axis=1)"]
    if batched:
        lines += ["batch = tl.program_id(axis=2)" if not grouped else "batch = tl.program_id(axis=1)",
                  f"{a} += batch * stride_ab", f"{b} += batch * stride_bb", f"{c} += batch * stride_cb"]
    lines += ["offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
              "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
              "offs_k = tl.arange(0, BLOCK_K)",
              f"a_ptrs = {a} + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak",
              f"b_ptrs = {b} + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn",
              "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
              "for k in range(0, tl.cdiv(K, BLOCK_K)):",
              "    k_left = K - k * BLOCK_K",
              "    a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)",
              "    b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)"]
    lines += [f"    {ln}" for ln in _dot(style)]
    lines += ["    a_ptrs += BLOCK_K * stride_ak", "    b_ptrs += BLOCK_K * stride_bk"]
    lines += epilogue
    lines += ["c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
              f"tl.store({c} + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc, mask=c_mask)"]
    head = f"@triton.jit\ndef {name}(\n    {', '.join(args)},\n    {', '.join(consts)},\n):\n"
    return head + comment(style, note or "each program computes one BLOCK_M x BLOCK_N tile, accumulating in fp32") \
        + "\n".join(f"    {ln}" for ln in lines) + "\n"


def _grid_lines(style: Style, grouped: bool, batched: str | None) -> list[str]:
    if grouped:
        g = "triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)"
        return [f"grid = ({g}, {batched})" if batched else f"grid = ({g},)"]
    extra = f", {batched}" if batched else ""
    return [f"grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N){extra})"]


def _blocks(rng: random.Random) -> tuple[int, int, int]:
    return rng.choice(BLOCKS), rng.choice(BLOCKS), rng.choice(BLOCKS)


# --------------------------------------------------------------------------- Level 1


@dataclass
class MatmulCase:
    """How a Level-1 matmul family maps its inputs onto the kernel's A (M x K) and B (K x N)."""

    family: str
    doc: str
    forms: list[str]  # reference return expressions over {a}, {b}
    a_shape: Callable[[dict], list[str]]
    b_shape: Callable[[dict], list[str]]
    out_shape: str  # launcher expression of the output shape, over a / b names
    mnk: str  # launcher lines computing M, N, K (format {a}, {b})
    a_strides: str
    b_strides: str
    sizes: list[tuple[str, ...]] = field(default_factory=list)
    batched: bool = False


CASES = [
    MatmulCase("matmul", "Multiplies two square matrices.",
               ["torch.matmul({a}, {b})", "{a} @ {b}", "torch.mm({a}, {b})"],
               lambda s: [s[0], s[0]], lambda s: [s[0], s[0]], "({a}.shape[0], {b}.shape[1])",
               "M, K = {a}.shape\nN = {b}.shape[1]", "{a}.stride(0), {a}.stride(1)", "{b}.stride(0), {b}.stride(1)",
               sizes=[("N",), ("size",), ("dim",), ("n",), ("N",), ("M",), ("matrix_size",)]),
    MatmulCase("matmul_rect", "Multiplies an (M, K) matrix by a (K, N) matrix.",
               ["torch.matmul({a}, {b})", "{a} @ {b}"],
               lambda s: [s[0], s[1]], lambda s: [s[1], s[2]], "({a}.shape[0], {b}.shape[1])",
               "M, K = {a}.shape\nN = {b}.shape[1]", "{a}.stride(0), {a}.stride(1)", "{b}.stride(0), {b}.stride(1)",
               sizes=[("M", "K", "N"), ("m", "k", "n"), ("rows", "inner", "cols"), ("M", "K", "N"),
                      ("dim1", "dim2", "dim3")]),
    MatmulCase("matmul_transposed", "Multiplies A by the transpose of B (B is stored (N, K)).",
               ["torch.matmul({a}, {b}.T)", "{a} @ {b}.t()", "torch.mm({a}, {b}.transpose(0, 1))"],
               lambda s: [s[0], s[1]], lambda s: [s[2], s[1]], "({a}.shape[0], {b}.shape[0])",
               "M, K = {a}.shape\nN = {b}.shape[0]", "{a}.stride(0), {a}.stride(1)",
               "{b}.stride(1), {b}.stride(0)", sizes=[("M", "K", "N"), ("m", "k", "n"), ("M", "K", "N"),
                                                      ("batch_size", "in_features", "out_features")]),
    MatmulCase("bmm", "Batched matrix multiplication of (batch, M, K) by (batch, K, N).",
               ["torch.bmm({a}, {b})", "torch.matmul({a}, {b})", "{a} @ {b}"],
               lambda s: [s[0], s[1], s[2]], lambda s: [s[0], s[2], s[3]], "({a}.shape[0], {a}.shape[1], {b}.shape[2])",
               "n_batch, M, K = {a}.shape\nN = {b}.shape[2]", "{a}.stride(0), {a}.stride(1), {a}.stride(2)",
               "{b}.stride(0), {b}.stride(1), {b}.stride(2)",
               sizes=[("batch_size", "m", "k", "n"), ("B", "M", "K", "N"), ("batch_size", "M", "K", "N")],
               batched=True),
]

AB_NAMES = [("A", "B"), ("a", "b"), ("x", "w"), ("lhs", "rhs"), ("A", "B"), ("mat1", "mat2"), ("x", "y"),
            ("input", "other"), ("A", "B")]


def _fits(dims: list[int], batched: bool = False) -> bool:
    """Does every operand and the output of an (optionally batched) matmul stay within int32 offsets?"""
    batch, sides = (dims[0], dims[1:]) if batched else (1, dims)
    largest = max(a * b for a in sides for b in sides)
    return batch * largest < scale.INT32_SAFE


def _published(rng: random.Random, sizes: Sequence[str], choices: Sequence[Sequence[int]],
               batched: bool = False) -> dict[str, int]:
    """Published-scale sizes for a tiled kernel (shape-general), each operand within int32 offsets."""
    return dict(zip(sizes, scale.draw(rng, choices, fits=lambda d: _fits(d, batched))))


def render_matmul(case: MatmulCase, rng: random.Random, dtype: str, style: Style) -> Example:
    an, bn = style.pick_name(AB_NAMES, salt=1)
    sizes = style.pick_name(case.sizes)
    if {an, bn} & set(sizes):
        sizes = next(s for s in case.sizes if not {an, bn} & set(s))
    dims = ([rng.choice((2, 3))] if case.batched else []) + [rng.choice(MNK) for _ in sizes[1 if case.batched else 0:]]
    if case.family == "matmul":
        dims = [rng.choice(MNK)]
    constants = list(zip(sizes, dims))
    ref = RefSpec(doc=case.doc, init_params=[], init_lines=[], forward_args=[an, bn],
                  forward_lines=[f"return {style.pick(case.forms).format(a=an, b=bn)}"], constants=constants,
                  inputs=[(an, randn(case.a_shape(sizes), dtype)), (bn, randn(case.b_shape(sizes), dtype))],
                  init_inputs=[], forward_doc="the matrix product.")
    if style.sizes == "published":
        choices = ([(8, 16, 32, 64, 128)] + [(256, 512, 1024, 2048)] * 3) if case.batched else \
            [scale.MATMUL_SIDE] * len(sizes)
        ref.published = _published(rng, sizes, choices, case.batched)
    grouped = (not case.batched) and style.variant % 6 == 5  # tutorial 03 ordering, now and then
    kname = style.kernel(case.family)
    kernel = matmul_kernel(kname, style, [], [], batched=case.batched, grouped=grouped)
    bm, bn_, bk = _blocks(rng)
    launch = [ln.format(a=an, b=bn) for ln in case.mnk.split("\n")]
    launch.append(f"out = torch.empty({case.out_shape.format(a=an, b=bn)}, device={an}.device, dtype={an}.dtype)")
    launch += [f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn_}, {bk}"]
    launch += _grid_lines(style, grouped, "n_batch" if case.batched else None)
    out_strides = "out.stride(0), out.stride(1), out.stride(2)" if case.batched else "out.stride(0), out.stride(1)"
    extra = ", GROUP_M=4" if grouped else ""
    launch.append(f"{kname}[grid](\n    {an}, {bn}, out, M, N, K,\n    {case.a_strides.format(a=an, b=bn)}, "
                  f"{case.b_strides.format(a=an, b=bn)}, {out_strides},\n"
                  f"    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K{extra},\n)")
    launch.append("return out")
    helpers, forward = _wrap(case.family, style, kname, [an, bn], launch, [an, bn])
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example(case.family, ref, sol, style, case.doc, dtype, dict(zip(sizes, dims)))


def _wrap(family: str, style: Style, kname: str, params: list[str], launch: list[str],
          call: list[str]) -> tuple[list[str], list[str]]:
    """A launcher helper plus a one-line forward, or the launch written inside forward."""
    body = []
    for ln in launch:
        body += ln.split("\n")
    if style.launcher == "inline":
        return [], body
    fn = style.pick_name(("{}", "triton_{}", "{}_forward", "launch_{}"), salt=3).format(family)
    if fn == kname:
        fn = f"launch_{family}"
    doc = '    """Launches one program per output tile."""\n' if style.sol_docstrings else ""
    helper = f"def {fn}({', '.join(params)}):\n" + doc + "\n".join(f"    {ln}" if ln else "" for ln in body) + "\n"
    return [helper], [f"return {fn}({', '.join(call)})"]


# ---- matvec, outer, matmul_scalar: the simpler shapes


def render_matvec(rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name([("M", "K"), ("rows", "cols"), ("m", "k"), ("M", "K"), ("n_rows", "n_cols")])
    an, xn = style.pick_name([("A", "B"), ("A", "x"), ("matrix", "vector"), ("A", "B"), ("weight", "x")], salt=1)
    dims = [rng.choice((16, 33, 64, 100)), rng.choice((16, 32, 50, 64, 128))]
    ref = RefSpec(doc="Multiplies a matrix (M, K) by a column vector (K, 1).", init_params=[], init_lines=[],
                  forward_args=[an, xn],
                  forward_lines=[f"return {style.pick(['torch.matmul({a}, {b})', '{a} @ {b}']).format(a=an, b=xn)}"],
                  constants=list(zip(sizes, dims)),
                  inputs=[(an, randn(list(sizes), dtype)), (xn, randn([sizes[1], "1"], dtype))], init_inputs=[],
                  forward_doc="a (M, 1) tensor.")
    if style.sizes == "published":  # rows in blocks of BLOCK_M, K walked in chunks: both scale
        ref.published = _published(rng, sizes, [(256, 1024, 2048, 4096, 16384), (4096, 16384, 65536, 131072)])
    kname = style.kernel("matvec")
    ap, xp, op = style.ptr("a"), style.ptr("x"), style.ptr("out")
    kernel = f"""
@triton.jit
def {kname}({ap}, {xp}, {op}, M, K, stride_am, stride_ak, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
{comment(style, "each program owns BLOCK_M rows and walks K in BLOCK_K chunks")}    pid = tl.program_id(axis=0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        a = tl.load({ap} + rows[:, None] * stride_am + cols[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (cols[None, :] < K), other=0.0).to(tl.float32)
        v = tl.load({xp} + cols, mask=cols < K, other=0.0).to(tl.float32)
        acc += tl.sum(a * v[None, :], axis=1)
    tl.store({op} + rows, acc, mask=rows < M)
"""
    bm, bk = rng.choice((16, 32, 64)), rng.choice((16, 32, 64))
    launch = [f"M, K = {an}.shape", f"vec = {xn}.reshape(-1).contiguous()",
              f"out = torch.empty((M, 1), device={an}.device, dtype={an}.dtype)",
              f"grid = (triton.cdiv(M, {bm}),)",
              f"{kname}[grid]({an}, vec, out, M, K, {an}.stride(0), {an}.stride(1), BLOCK_M={bm}, BLOCK_K={bk})",
              "return out"]
    helpers, forward = _wrap("matvec", style, kname, [an, xn], launch, [an, xn])
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example("matvec", ref, sol, style, ref.doc, dtype, dict(zip(sizes, dims)))


def render_outer(rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name([("M", "N"), ("n", "m"), ("len_a", "len_b"), ("M", "N"), ("dim1", "dim2")])
    an, bn = style.pick_name([("a", "b"), ("x", "y"), ("u", "v"), ("vec1", "vec2")], salt=1)
    dims = [rng.choice((16, 33, 64, 100)), rng.choice((16, 32, 50, 64))]
    ref = RefSpec(doc="Outer product of two vectors.", init_params=[], init_lines=[], forward_args=[an, bn],
                  forward_lines=[f"return {style.pick(['torch.outer({a}, {b})', '{a}[:, None] * {b}[None, :]', 'torch.ger({a}, {b})'][:2]).format(a=an, b=bn)}"],
                  constants=list(zip(sizes, dims)),
                  inputs=[(an, randn([sizes[0]], dtype)), (bn, randn([sizes[1]], dtype))], init_inputs=[],
                  forward_doc="an (M, N) matrix.")
    if style.sizes == "published":
        ref.published = _published(rng, sizes, [scale.MATMUL_SIDE + (16384,), scale.MATMUL_SIDE + (16384,)])
    kname = style.kernel("outer")
    ap, bp, op = style.ptr(an), style.ptr(bn), style.ptr("out")
    kernel = f"""
@triton.jit
def {kname}({ap}, {bp}, {op}, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
{comment(style, "a 2D grid of BLOCK_M x BLOCK_N output tiles; out[i, j] = a[i] * b[j]")}    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    u = tl.load({ap} + offs_m, mask=offs_m < M, other=0.0)
    v = tl.load({bp} + offs_n, mask=offs_n < N, other=0.0)
    tile = u[:, None] * v[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store({op} + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)
"""
    bm, bnn = rng.choice((16, 32)), rng.choice((16, 32, 64))
    launch = [f"{an}, {bn} = {an}.contiguous(), {bn}.contiguous()", f"M, N = {an}.numel(), {bn}.numel()",
              f"out = torch.empty((M, N), device={an}.device, dtype={an}.dtype)",
              f"grid = (triton.cdiv(M, {bm}), triton.cdiv(N, {bnn}))",
              f"{kname}[grid]({an}, {bn}, out, M, N, BLOCK_M={bm}, BLOCK_N={bnn})", "return out"]
    helpers, forward = _wrap("outer", style, kname, [an, bn], launch, [an, bn])
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example("outer", ref, sol, style, ref.doc, dtype, dict(zip(sizes, dims)))


def render_matmul_scalar(rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name([("M", "N"), ("rows", "cols"), ("n", "m"), ("M", "N"), ("batch_size", "dim")])
    an = style.pick_name(("A", "x", "matrix", "A", "input", "X"), salt=1)
    dims = [rng.choice((16, 33, 64, 100)), rng.choice((16, 32, 50, 128))]
    s_value = rng.choice((3.14, 0.5, -2.0, 1.75))
    as_input = style.variant % 2 == 0
    if as_input:
        ref = RefSpec(doc="Multiplies a matrix by a scalar.", init_params=[], init_lines=[], forward_args=[an, "s"],
                      forward_lines=[f"return {an} * s"], constants=list(zip(sizes, dims)),
                      inputs=[(an, randn(list(sizes), dtype)), ("s", repr(s_value))], init_inputs=[],
                      forward_doc="the scaled matrix.")
    else:
        ref = RefSpec(doc="Multiplies a matrix by a scalar fixed at construction.", init_params=[("scalar", "float")],
                      init_lines=["self.scalar = scalar"], forward_args=[an],
                      forward_lines=[f"return {an} * self.scalar"],
                      constants=list(zip(sizes, dims)) + [("scalar", s_value)],
                      inputs=[(an, randn(list(sizes), dtype))], init_inputs=["scalar"], forward_doc="the scaled matrix.")
    if style.sizes == "published":  # a flat pass: both sides scale, offsets in int64 past 2**31
        side = (1024, 4096, 16384, 16384, 65536)
        ref.published = dict(zip(sizes, scale.draw(rng, (side, side), cap=scale.MAX_ELEMENTS)))
        style = scale.with_offsets(style, scale.largest_input(ref.inputs, {**dict(ref.constants), **ref.published}))
    kname = style.kernel("scale")
    ip, op, b, n = style.ptr(an), style.ptr("out"), style.block, style.numel
    if n in sizes:
        n = "n_elements"
    offsets = "\n".join(f"    {ln}" for ln in scale.block_offsets(style, "pid", b, "offs"))
    kernel = f"""
@triton.jit
def {kname}({ip}, {op}, s, {n}, {b}: tl.constexpr):
{comment(style, "a flat pass over every element")}    pid = tl.program_id(axis=0)
{offsets}
    mask = offs < {n}
    v = tl.load({ip} + offs, mask=mask, other=0.0)
    tl.store({op} + offs, v * s, mask=mask)
"""
    s_expr = "s" if as_input else "self.scalar"
    launch = [f"{an} = {an}.contiguous()", f"out = torch.empty_like({an})", f"{n} = out.numel()",
              f"grid = (triton.cdiv({n}, {style.block_size}),)",
              f"{kname}[grid]({an}, out, {s_expr}, {n}, {b}={style.block_size})", "return out"]
    helpers, forward = _wrap("matmul_scalar", style, kname, [an, "s"],
                             [ln.replace("self.scalar", "s") for ln in launch], [an, s_expr])
    if style.launcher == "inline":
        forward = launch
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example("matmul_scalar", ref, sol, style, ref.doc, dtype, dict(zip(sizes, dims)))


# --------------------------------------------------------------------------- Level 2: GEMM epilogues


@dataclass
class Epilogue:
    family: str
    doc: str
    ref_lines: Callable[[str], list[str]]  # forward lines after `x = self.<linear>(x)`
    acc_lines: list[str]  # kernel lines on `acc` after the bias is added
    scalars: list[tuple[str, tuple]] = field(default_factory=list)
    description: str = ""
    forms: list = field(default_factory=list)  # other ways to write it: (reference-only init lines, ref_lines)


def _tanh(v: str) -> str:
    return f"2.0 * tl.sigmoid(2.0 * {v}) - 1.0"


EPILOGUES = [
    Epilogue("gemm_bias_relu", "A linear layer followed by ReLU.", lambda x: [f"return torch.relu({x})"],
             ["acc = tl.maximum(acc, 0.0)"], description="fused GEMM, bias and ReLU",
             forms=[(["self.relu = nn.ReLU()"], lambda x: [f"return self.relu({x})"]),
                    ([], lambda x: [f"return F.relu({x})"]), ([], lambda x: [f"return {x}.relu()"])]),
    Epilogue("gemm_bias_gelu", "A linear layer followed by GELU.", lambda x: [f"return F.gelu({x})"],
             ["acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))"], description="fused GEMM, bias and GELU",
             forms=[(["self.gelu = nn.GELU()"], lambda x: [f"return self.gelu({x})"]),
                    ([], lambda x: [f"return torch.nn.functional.gelu({x})"])]),
    Epilogue("gemm_scale_sigmoid", "A linear layer, a constant scale, then sigmoid.",
             lambda x: [f"{x} = {x} * self.scale", f"return torch.sigmoid({x})"],
             ["acc = tl.sigmoid(acc * scale)"], scalars=[("scale", (0.5, 2.0, 1.5))],
             description="fused GEMM, scale and sigmoid",
             forms=[([], lambda x: [f"return torch.sigmoid({x} * self.scale)"]),
                    ([], lambda x: [f"{x} = {x} * self.scale", f"return {x}.sigmoid()"])]),
    Epilogue("gemm_bias_leaky_relu", "A linear layer followed by LeakyReLU.",
             lambda x: [f"return F.leaky_relu({x}, negative_slope=self.negative_slope)"],
             ["acc = tl.where(acc > 0, acc, acc * negative_slope)"], scalars=[("negative_slope", (0.01, 0.1, 0.2))],
             description="fused GEMM, bias and LeakyReLU",
             forms=[(["self.leaky_relu = nn.LeakyReLU(negative_slope)"], lambda x: [f"return self.leaky_relu({x})"])]),
    Epilogue("gemm_bias_tanh", "A linear layer followed by tanh.", lambda x: [f"return torch.tanh({x})"],
             [f"acc = {_tanh('acc')}"], description="fused GEMM, bias and tanh",
             forms=[(["self.tanh = nn.Tanh()"], lambda x: [f"return self.tanh({x})"]),
                    ([], lambda x: [f"return {x}.tanh()"])]),
    Epilogue("gemm_bias_silu", "A linear layer followed by SiLU.", lambda x: [f"return F.silu({x})"],
             ["acc = acc * tl.sigmoid(acc)"], description="fused GEMM, bias and SiLU",
             forms=[(["self.act = nn.SiLU()"], lambda x: [f"return self.act({x})"]),
                    ([], lambda x: [f"return {x} * torch.sigmoid({x})"])]),
    Epilogue("gemm_clamp", "A linear layer whose output is clamped into [min_val, max_val].",
             lambda x: [f"return torch.clamp({x}, min=self.min_val, max=self.max_val)"],
             ["acc = tl.minimum(tl.maximum(acc, min_val), max_val)"],
             scalars=[("min_val", (-0.5, -1.0)), ("max_val", (0.5, 1.0, 2.0))], description="fused GEMM and clamp",
             forms=[([], lambda x: [f"return {x}.clamp(self.min_val, self.max_val)"]),
                    ([], lambda x: [f"return torch.clamp({x}, self.min_val, self.max_val)"])]),
    Epilogue("matmul_scale_residual", "A linear layer whose output is scaled and added back to itself.",
             lambda x: [f"original = {x}", f"{x} = {x} * self.scale", f"return {x} + original"],
             ["acc = acc * scale + acc"], scalars=[("scale", (0.5, 2.0, 0.1))],
             description="GEMM, scale and residual add, fused",
             forms=[([], lambda x: [f"return {x} * self.scale + {x}"])]),
]
LINEAR_ATTRS = ("linear", "fc", "gemm", "proj", "linear", "fc1", "dense")
GEMM_SIZES = [("batch_size", "in_features", "out_features"), ("batch", "in_dim", "out_dim"), ("M", "K", "N"),
              ("batch_size", "input_size", "hidden_size"), ("batch_size", "in_features", "out_features"),
              ("B", "D_in", "D_out")]
GEMM_X = ("x", "x", "inp", "input_tensor", "input", "X", "x", "hidden_states")


def render_gemm(ep: Epilogue, rng: random.Random, dtype: str, style: Style, residual: bool = False) -> Example:
    sizes = style.pick_name(GEMM_SIZES)
    x = style.pick_name(GEMM_X, salt=1)
    attr = style.pick(LINEAR_ATTRS, salt=2)
    dims = [rng.choice((8, 16, 24, 32)), rng.choice(MNK), rng.choice(MNK)]
    scalars = [(n, rng.choice(ch)) for n, ch in ep.scalars]
    constants = list(zip(sizes, dims)) + scalars
    init_params = [(sizes[1], "int"), (sizes[2], "int")] + [(n, "float") for n, _ in scalars]
    init_lines = [f"self.{attr} = nn.Linear({sizes[1]}, {sizes[2]})"] + [f"self.{n} = {n}" for n, _ in scalars]
    own_init, lines = style.pick([([], ep.ref_lines), *ep.forms], salt=style.phrasing)
    fwd = [f"{x} = self.{attr}({x})"] + lines(x)
    args = [x] + (["residual"] if residual else [])
    inputs = [(x, randn([sizes[0], sizes[1]], dtype))]
    if residual:
        inputs.append(("residual", randn([sizes[0], sizes[2]], dtype)))
    ref = RefSpec(doc=ep.doc, init_params=init_params, init_lines=init_lines + own_init, forward_args=args,
                  forward_lines=fwd, constants=constants, inputs=inputs,
                  init_inputs=[sizes[1], sizes[2]] + [n for n, _ in scalars], forward_doc=f"a ({sizes[0]}, {sizes[2]}) tensor.",
                  imports=["import torch.nn.functional as F"] if any("F." in ln for ln in fwd) else [],
                  arg_docs={sizes[1]: "Number of input features.", sizes[2]: "Number of output features."})
    if style.sizes == "published":  # the tiled kernel is shape-general: batch and both feature sizes grow
        ref.published = _published(rng, sizes, [scale.GEMM_BATCH, scale.FEATURES, scale.FEATURES])
    kname = style.kernel(ep.family)
    bias_p = style.ptr("bias")
    extra = [bias_p] + (["r_ptr", "stride_rm", "stride_rn"] if residual else []) + [n for n, _ in scalars]
    epi = [f"bias = tl.load({bias_p} + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)",
           "acc = acc + bias[None, :]"] + ep.acc_lines
    if residual:
        epi += ["r_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
                "res = tl.load(r_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn, mask=r_mask, other=0.0)",
                "acc = acc + res.to(tl.float32)"]
    grouped = style.variant % 6 == 5
    note = "out = epilogue(x @ W^T + b); W is read as (K, N) through its strides, no transpose copy"
    kernel = matmul_kernel(kname, style, epi, extra, grouped=grouped, note=note)
    bm, bn, bk = _blocks(rng)
    launch = [f"M, K = {x}.shape", "N = weight.shape[0]",
              f"out = torch.empty((M, N), device={x}.device, dtype={x}.dtype)",
              f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, {bk}"] + _grid_lines(style, grouped, None)
    res_args = ", residual, residual.stride(0), residual.stride(1)" if residual else ""
    sc = "".join(f", {n}" for n, _ in scalars)
    gm = ", GROUP_M=4" if grouped else ""
    launch.append(f"{kname}[grid](\n    {x}, weight, out, M, N, K,\n    {x}.stride(0), {x}.stride(1), weight.stride(1), "
                  f"weight.stride(0), out.stride(0), out.stride(1),\n    bias{res_args}{sc},\n"
                  f"    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K{gm},\n)")
    launch.append("return out")
    params = [x, "weight", "bias"] + (["residual"] if residual else []) + [n for n, _ in scalars]
    call = [x, f"self.{attr}.weight", f"self.{attr}.bias"] + (["residual"] if residual else []) + [f"self.{n}" for n, _ in scalars]
    helpers, forward = _wrap(ep.family, style, kname, params, launch, call)
    if style.launcher == "inline":
        forward = [f"weight, bias = self.{attr}.weight, self.{attr}.bias"] + [f"{n} = self.{n}" for n, _ in scalars] + forward
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    return make_example(ep.family, ref, sol, style, ep.description or ep.doc, dtype, dict(zip(sizes, dims)))


ADD_RELU_RESIDUAL = Epilogue("matmul_add_relu_residual", "A linear layer, ReLU, then a residual tensor added.",
                             lambda x: [f"{x} = torch.relu({x})", f"return {x} + residual"],
                             ["acc = tl.maximum(acc, 0.0)"], description="GEMM, ReLU and residual add, fused",
                             forms=[([], lambda x: [f"return F.relu({x}) + residual"]),
                                    (["self.relu = nn.ReLU()"], lambda x: [f"return self.relu({x}) + residual"])])


def render_bmm_scale_add(rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name([("batch_size", "m", "k", "n"), ("B", "M", "K", "N"), ("batch_size", "M", "K", "N")])
    a, b, c = style.pick_name([("a", "b", "c"), ("x", "y", "bias_in"), ("lhs", "rhs", "addend")], salt=1)
    dims = [rng.choice((2, 3))] + [rng.choice(MNK) for _ in range(3)]
    scale_value = rng.choice((0.5, 2.0, 0.125))
    fwd = style.pick([[f"out = torch.bmm({a}, {b})", "out = out * self.scale", f"return out + {c}"],
                      [f"return torch.bmm({a}, {b}) * self.scale + {c}"]])
    ref = RefSpec(doc="Batched matmul, scaled by a constant, plus a third tensor.", init_params=[("scale", "float")],
                  init_lines=["self.scale = scale"], forward_args=[a, b, c], forward_lines=fwd,
                  constants=list(zip(sizes, dims)) + [("scale", scale_value)],
                  inputs=[(a, randn([sizes[0], sizes[1], sizes[2]], dtype)), (b, randn([sizes[0], sizes[2], sizes[3]], dtype)),
                          (c, randn([sizes[0], sizes[1], sizes[3]], dtype))],
                  init_inputs=["scale"], forward_doc="a (batch, m, n) tensor.")
    if style.sizes == "published":
        ref.published = _published(rng, sizes, [(8, 16, 32, 64, 128)] + [(128, 256, 512, 1024)] * 3, batched=True)
    kname = style.kernel("bmm_scale_add")
    epi = ["d_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
           "d = tl.load(d_ptr + batch * stride_db + offs_m[:, None] * stride_dm + offs_n[None, :] * stride_dn, mask=d_mask, other=0.0)",
           "acc = acc * scale + d.to(tl.float32)"]
    kernel = matmul_kernel(kname, style, epi, ["d_ptr", "stride_db", "stride_dm", "stride_dn", "scale"], batched=True,
                           note="grid axis 2 walks the batch; the scale and the added tensor are applied to the tile")
    bm, bn, bk = _blocks(rng)
    launch = [f"n_batch, M, K = {a}.shape", f"N = {b}.shape[2]",
              f"out = torch.empty((n_batch, M, N), device={a}.device, dtype={a}.dtype)",
              f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, {bk}",
              "grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), n_batch)",
              f"{kname}[grid](\n    {a}, {b}, out, M, N, K,\n    {a}.stride(0), {a}.stride(1), {a}.stride(2), "
              f"{b}.stride(0), {b}.stride(1), {b}.stride(2),\n    out.stride(0), out.stride(1), out.stride(2),\n"
              f"    {c}, {c}.stride(0), {c}.stride(1), {c}.stride(2), scale,\n"
              "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,\n)", "return out"]
    helpers, forward = _wrap("bmm_scale_add", style, kname, [a, b, c, "scale"], launch, [a, b, c, "self.scale"])
    if style.launcher == "inline":
        forward = ["scale = self.scale"] + forward
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward)
    return make_example("bmm_scale_add", ref, sol, style, "batched matmul, scale and add, fused", dtype,
                        dict(zip(sizes, dims)))


def templates() -> list[TemplateInfo]:
    dts = ("float32", "float16")
    out = [TemplateInfo(c.family, lambda rng, d, s, c=c: render_matmul(c, rng, d, s), dts) for c in CASES]
    out += [TemplateInfo("matvec", render_matvec, dts), TemplateInfo("outer", render_outer, dts),
            TemplateInfo("matmul_scalar", render_matmul_scalar, dts)]
    # nn.Linear weights are fp32 and the reference runs as written: GEMM tasks stay fp32 (the
    # verifier's dtype variation still runs them in half precision on a GPU)
    fp32 = ("float32",)
    out += [TemplateInfo(e.family, lambda rng, d, s, e=e: render_gemm(e, rng, d, s), fp32) for e in EPILOGUES]
    out.append(TemplateInfo("matmul_add_relu_residual",
                            lambda rng, d, s: render_gemm(ADD_RELU_RESIDUAL, rng, d, s, residual=True), fp32))
    out.append(TemplateInfo("bmm_scale_add", render_bmm_scale_add, dts))
    return out
