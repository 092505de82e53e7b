"""What every op template shares: the style of one example, and the two module renderers.

A template turns (shape, dtype, style) into a KernelBench reference module and a Triton
`ModelNew` solution. The style varies what a reader could write differently without changing the
computation: names (kernels, pointers, blocks, inputs, size constants, attributes), block sizes,
launcher and grid styles, comments, docstrings, type hints and the reference's own formulation.
Both modules are assembled from `RefSpec` / `SolSpec`, so every example is laid out the way the
built-in suite and KernelBench lay theirs out.
"""

from __future__ import annotations

import dataclasses
import random
import textwrap
from dataclasses import dataclass, field
from typing import Callable, Sequence

DTYPES = ("float32", "float16", "bfloat16")
TORCH_DTYPE = {"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16"}


@dataclass(frozen=True)
class Style:
    kernel_fmt: str  # "{}_kernel": how a kernel is named from its op
    ptr_fmt: str  # "{}_ptr": how a pointer argument is named from its tensor
    numel: str  # name of the element count
    block: str  # name of the block-size constexpr
    block_size: int  # elements per program in 1D kernels
    pid: str
    offs: str
    mask: str
    launcher: str  # "function" (module-level helper) | "inline" (inside forward)
    grid: str  # "lambda" (meta-parameter grid) | "tuple"
    comments: bool
    ref_docstrings: bool
    sol_docstrings: bool
    hints: bool  # type hints on forward
    classic_super: bool  # super(Model, self).__init__() vs super().__init__()
    upcast: bool  # compute in fp32 explicitly even for fp32 inputs
    variant: int  # picks among a template's alternative formulations and attribute names
    names: int  # picks among input / size-constant naming schemes
    loop: bool = False  # 1D kernels: a capped grid whose programs loop over several blocks each

    def kernel(self, op: str) -> str:
        return self.kernel_fmt.format(op)

    def ptr(self, name: str) -> str:
        return self.ptr_fmt.format(name)

    def pick(self, options: Sequence, salt: int = 0):
        """A deterministic choice among a template's alternatives for this example."""
        return options[(self.variant + salt) % len(options)]

    def pick_name(self, options: Sequence, salt: int = 0):
        return options[(self.names + salt) % len(options)]

    def summary(self) -> str:
        return (f"kernel={self.kernel_fmt} ptr={self.ptr_fmt} block={self.block}={self.block_size} "
                f"launcher={self.launcher}/{self.grid} comments={int(self.comments)} "
                f"docs={int(self.ref_docstrings)}{int(self.sol_docstrings)} v={self.variant} n={self.names}"
                + (" loop=1" if self.loop else ""))


KERNEL_FMTS = ("{}_kernel", "_{}_kernel", "{}_fwd_kernel", "triton_{}", "{}_kernel", "k_{}")
PTR_FMTS = ("{}_ptr", "{}_ptr", "{}_p", "p_{}")
NUMELS = ("n_elements", "numel", "n", "N", "n_elements")
BLOCKS = ("BLOCK_SIZE", "BLOCK", "XBLOCK", "BLOCK_SIZE")
BLOCK_SIZES = (256, 512, 1024, 1024)  # few programs: the interpreter pays per program
PIDS = ("pid", "pid", "program_id", "block_id")
OFFS = ("offsets", "offs", "idx", "offsets")
MASKS = ("mask", "mask", "valid", "in_bounds")


def draw_style(rng: random.Random) -> Style:
    return Style(
        kernel_fmt=rng.choice(KERNEL_FMTS), ptr_fmt=rng.choice(PTR_FMTS), numel=rng.choice(NUMELS),
        block=rng.choice(BLOCKS), block_size=rng.choice(BLOCK_SIZES), pid=rng.choice(PIDS),
        offs=rng.choice(OFFS), mask=rng.choice(MASKS), launcher=rng.choice(("function", "function", "inline")),
        grid=rng.choice(("lambda", "tuple")), comments=rng.random() < 0.5, ref_docstrings=rng.random() < 0.6,
        sol_docstrings=rng.random() < 0.3, hints=rng.random() < 0.6, classic_super=rng.random() < 0.5,
        upcast=rng.random() < 0.5, variant=rng.randrange(12), names=rng.randrange(12), loop=rng.random() < 0.3,
    )


DEFAULT_STYLE = Style(kernel_fmt="{}_kernel", ptr_fmt="{}_ptr", numel="n_elements", block="BLOCK_SIZE",
                      block_size=1024, pid="pid", offs="offsets", mask="mask", launcher="function",
                      grid="lambda", comments=True, ref_docstrings=True, sol_docstrings=False, hints=True,
                      classic_super=True, upcast=False, variant=0, names=0)


# --------------------------------------------------------------------------- module specs


@dataclass
class RefSpec:
    """A KernelBench reference module."""

    doc: str  # class docstring (one sentence)
    init_params: list[tuple[str, str]]  # constructor (name, annotation)
    init_lines: list[str]  # after super().__init__(); shared with the solution (same state_dict)
    forward_args: list[str]
    forward_lines: list[str]
    constants: list[tuple[str, object]]  # module-level sizes and settings, in order
    inputs: list[tuple[str, str]]  # get_inputs(): (variable, expression)
    init_inputs: list[str]  # get_init_inputs() entries (constant names or literals)
    forward_doc: str = ""  # what forward returns, for the docstring
    imports: list[str] = field(default_factory=list)  # beyond torch / torch.nn


@dataclass
class SolSpec:
    """A Triton solution module with `class ModelNew`."""

    kernels: list[str]  # full @triton.jit function sources
    helpers: list[str]  # module-level launcher functions
    forward_lines: list[str]
    init_lines: list[str] | None = None  # None: the reference's init lines (same parameters)
    imports: list[str] = field(default_factory=list)
    doc: str = ""


def _super(cls: str, style: Style) -> str:
    return f"super({cls}, self).__init__()" if style.classic_super else "super().__init__()"


def _signature(args: list[str], style: Style, hint: str = "torch.Tensor") -> str:
    if style.hints:
        return ", ".join(f"{a}: {hint}" for a in args)
    return ", ".join(args)


def _init_signature(params: list[tuple[str, str]], style: Style) -> str:
    if not params:
        return "self"
    if style.hints:
        return "self, " + ", ".join(f"{n}: {t}" for n, t in params)
    return "self, " + ", ".join(n for n, _ in params)


def _constant(v: object) -> str:
    return repr(v)


def render_reference(spec: RefSpec, style: Style) -> str:
    clash = {n for n, _ in spec.constants} & {v for v, _ in spec.inputs}
    if clash:  # get_inputs would read its own local instead of the module constant
        raise ValueError(f"template bug: input names {sorted(clash)} are also size constants")
    lines = ["import torch", "import torch.nn as nn"]
    lines += spec.imports
    lines += ["", "", "class Model(nn.Module):"]
    if style.ref_docstrings:
        lines += ['    """', f"    {spec.doc}", '    """', ""]
    lines.append(f"    def __init__({_init_signature(spec.init_params, style)}):")
    lines.append(f"        {_super('Model', style)}")
    lines += [f"        {ln}" for ln in spec.init_lines]
    lines.append("")
    ret = " -> torch.Tensor" if style.hints else ""
    lines.append(f"    def forward(self, {_signature(spec.forward_args, style)}){ret}:")
    if style.ref_docstrings and spec.forward_doc:
        lines += ['        """', f"        Returns: {spec.forward_doc}", '        """']
    lines += [f"        {ln}" for ln in spec.forward_lines]
    lines += ["", ""]
    lines += [f"{n} = {_constant(v)}" for n, v in spec.constants]
    lines += ["", "", "def get_inputs():"]
    lines += [f"    {v} = {e}" for v, e in spec.inputs]
    lines.append(f"    return [{', '.join(v for v, _ in spec.inputs)}]")
    lines += ["", "", "def get_init_inputs():", f"    return [{', '.join(spec.init_inputs)}]", ""]
    return "\n".join(lines)


def render_solution(ref: RefSpec, sol: SolSpec, style: Style) -> str:
    imports = ["import torch", "import torch.nn as nn"] + [i for i in sol.imports if "triton" not in i]
    imports += ["import triton", "import triton.language as tl"]
    parts = ["\n".join(dict.fromkeys(imports))]
    parts += [textwrap.dedent(k).strip("\n") for k in sol.kernels]
    parts += [textwrap.dedent(h).strip("\n") for h in sol.helpers]
    cls = ["class ModelNew(nn.Module):"]
    if style.sol_docstrings:
        cls += ['    """', f"    {sol.doc or 'Triton version of Model: ' + ref.doc[0].lower() + ref.doc[1:]}", '    """', ""]
    cls.append(f"    def __init__({_init_signature(ref.init_params, style)}):")
    cls.append(f"        {_super('ModelNew', style)}")
    init_lines = ref.init_lines if sol.init_lines is None else sol.init_lines
    cls += [f"        {ln}" for ln in init_lines]
    cls.append("")
    ret = " -> torch.Tensor" if style.hints else ""
    cls.append(f"    def forward(self, {_signature(ref.forward_args, style)}){ret}:")
    cls += [f"        {ln}" if ln else "" for ln in sol.forward_lines]
    parts.append("\n".join(cls))
    return "\n\n\n".join(parts) + "\n"


# --------------------------------------------------------------------------- shared snippets


def comment(style: Style, text: str, indent: str = "    ") -> str:
    """A comment line (with its newline) when the style writes comments, else nothing."""
    return f"{indent}# {text}\n" if style.comments else ""


LOOP_PROGRAMS = 64  # the grid cap of loop-style kernels: each program then walks several blocks


def grid_1d(style: Style, total: str, block_value: str | int | None = None, loop: bool = False) -> str:
    """The grid expression of a 1D launch over `total` elements (`loop`: at most LOOP_PROGRAMS
    programs, for a kernel whose programs loop over blocks)."""
    if style.grid == "lambda":
        blocks = f'triton.cdiv({total}, meta["{style.block}"])'
        return f"lambda meta: (min({blocks}, {LOOP_PROGRAMS}),)" if loop else f"lambda meta: ({blocks},)"
    blocks = f"triton.cdiv({total}, {block_value if block_value is not None else style.block_size})"
    return f"(min({blocks}, {LOOP_PROGRAMS}),)" if loop else f"({blocks},)"


def widen(value: float, rng: random.Random, share: float = 0.5) -> float:
    """A constant near a template's listed one, for `share` of the examples: constants vary more
    than a fixed list of choices (scaled by 0.5 .. 2, sign and order of bounds kept)."""
    if rng.random() >= share or value == 0:
        return value
    return round(value * rng.choice((0.5, 0.6, 0.75, 0.8, 1.25, 1.5, 2.0)), 4)


def fp32(style: Style, dtype: str, expr: str, force: bool = False) -> str:
    """`expr` converted to fp32 when the inputs are half precision, the computation needs fp32
    (`force`: transcendental math, whose GPU intrinsics take fp32), or the style upcasts anyway."""
    return f"{expr}.to(tl.float32)" if (force or dtype != "float32" or style.upcast) else expr


_FP32_MATH = ("tl.exp", "tl.erf", "tl.sigmoid", "tl.log", "tl.sqrt", "tl.rsqrt", "tl.cos", "tl.sin", "/")


def needs_fp32(lines: Sequence[str]) -> bool:
    """Does a computation call math that must run in fp32 (whatever dtype the verifier feeds)?"""
    text = "\n".join(lines)
    return any(tok in text for tok in _FP32_MATH)


def randn(shape: Sequence[str], dtype: str, extra: str = "") -> str:
    dt = "" if dtype == "float32" else f", dtype={TORCH_DTYPE[dtype]}"
    expr = f"torch.randn({', '.join(shape)}{dt})"
    return f"{expr}{extra}"


def rand(shape: Sequence[str], dtype: str, extra: str = "") -> str:
    dt = "" if dtype == "float32" else f", dtype={TORCH_DTYPE[dtype]}"
    return f"torch.rand({', '.join(shape)}{dt}){extra}"


@dataclass(frozen=True)
class Example:
    """One rendered template instance."""

    family: str
    reference: str
    solution: str
    description: str
    dtype: str
    shape: dict
    style: Style

    @property
    def variant(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        return f"dtype={self.dtype} shape={shape} style=({self.style.summary()})"


# A template: (rng for shapes and parameters, dtype, style) -> Example
Template = Callable[[random.Random, str, Style], Example]


@dataclass(frozen=True)
class TemplateInfo:
    family: str
    render: Template
    dtypes: tuple[str, ...] = ("float32",)  # dtypes the template (and PyTorch on CPU) supports


def avoid_clashes(style: Style, taken: Sequence[str]) -> Style:
    """The style with its kernel-local names moved off any name the example already uses."""
    taken = set(taken)
    fixes = {}
    for attr, fallback in (("numel", "n_elements"), ("pid", "pid"), ("offs", "offsets"), ("mask", "mask")):
        if getattr(style, attr) in taken:
            fixes[attr] = fallback if fallback not in taken else f"{fallback}_"
    return dataclasses.replace(style, **fixes) if fixes else style
