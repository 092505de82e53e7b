"""What every op template shares: the style of one example, and the two module renderers.

A template turns (shape, dtype, style) into a KernelBench reference module and a Triton
`ModelNew` solution. The style varies what a reader could write differently without changing the
computation: names (kernels, pointers, blocks, inputs, size constants, attributes), block sizes,
launcher and grid styles, comments, docstrings, type hints and the reference's own formulation.
Both modules are assembled from `RefSpec` / `SolSpec`, so every example is laid out the way the
built-in suite and KernelBench lay theirs out. The reference's surface varies on top (surface.py:
docstrings, comments, layouts, hints), and a reference may come twice: at the verified sizes and at
published scale (scale.py), the second being what a prompt shows.
"""

from __future__ import annotations

import dataclasses
import random
import textwrap
from dataclasses import dataclass, field
from typing import Callable, Sequence

from . import surface
from .scale import largest_input

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
    # The reference's surface; the defaults are the house style (one layout, as before these existed)
    ref_doc: str = ""  # "" (house: `ref_docstrings` decides) | none | line | block | google | plain_args | numpy
    module_doc: bool = False  # a module docstring above the imports
    ref_comments: bool = False  # trailing comments on constants and get_init_inputs, a comment in forward
    layout: str = "after"  # module constants after the class | "before" it
    inline_dims: bool = False  # sizes only get_inputs reads written there as numbers
    direct_inputs: bool = False  # get_inputs returns [torch.randn(...)] without naming the tensors
    rand: bool = False  # torch.rand for plain torch.randn inputs (where the template allows it)
    ref_hints: str = ""  # "" (house: `hints` decides) | none | forward | all
    compact: bool = False  # one blank line between top-level blocks, none after the class docstring
    phrasing: int = 0  # picks among docstring, comment and offset phrasings
    sizes: str = "small"  # small: the prompt shows the verified sizes | published: published-scale constants
    int64: bool = False  # 1D kernels compute their offsets in int64

    @property
    def house_surface(self) -> bool:
        """Is the reference written in the house style (the one layout of before)?"""
        return (self.ref_doc, self.module_doc, self.ref_comments, self.layout, self.inline_dims, self.direct_inputs,
                self.rand, self.ref_hints, self.compact) == ("", False, False, "after", False, False, False, "", False)

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
                + (" loop=1" if self.loop else "") + (" int64=1" if self.int64 else "")
                + (f" sizes={self.sizes}" if self.sizes != "small" else "")
                + ("" if self.house_surface else f" surface=({self.surface_summary()})"))

    def surface_summary(self) -> str:
        return (f"doc={self.ref_doc or 'house'}{'+module' if self.module_doc else ''} layout={self.layout}"
                f"{'+inline' if self.inline_dims else ''}{'+direct' if self.direct_inputs else ''}"
                f" comments={int(self.ref_comments)} rand={int(self.rand)} hints={self.ref_hints or 'house'}"
                f" compact={int(self.compact)} p={self.phrasing}")


KERNEL_FMTS = ("{}_kernel", "_{}_kernel", "{}_fwd_kernel", "triton_{}", "{}_kernel", "k_{}")
PTR_FMTS = ("{}_ptr", "{}_ptr", "{}_p", "p_{}")
NUMELS = ("n_elements", "numel", "n", "N", "n_elements")
BLOCKS = ("BLOCK_SIZE", "BLOCK", "XBLOCK", "BLOCK_SIZE")
BLOCK_SIZES = (256, 512, 1024, 1024)  # few programs: the interpreter pays per program
PIDS = ("pid", "pid", "program_id", "block_id")
OFFS = ("offsets", "offs", "idx", "offsets")
MASKS = ("mask", "mask", "valid", "in_bounds")


HOUSE_SHARE = 0.14  # drawn styles keeping the house reference at the verified sizes (with example 0: ~15%)
SMALL_SHARE = 0.1  # of the others, those whose prompt shows the verified (small) sizes
INT64_SHARE = 0.5  # 1D kernels with int64 offsets where the published size does not already demand them
REF_DOCS = ("none", "none", "line", "line", "block", "google", "google", "plain_args", "plain_args", "numpy")


def draw_style(rng: random.Random) -> Style:
    style = Style(
        kernel_fmt=rng.choice(KERNEL_FMTS), ptr_fmt=rng.choice(PTR_FMTS), numel=rng.choice(NUMELS),
        block=rng.choice(BLOCKS), block_size=rng.choice(BLOCK_SIZES), pid=rng.choice(PIDS),
        offs=rng.choice(OFFS), mask=rng.choice(MASKS), launcher=rng.choice(("function", "function", "inline")),
        grid=rng.choice(("lambda", "tuple")), comments=rng.random() < 0.5, ref_docstrings=rng.random() < 0.6,
        sol_docstrings=rng.random() < 0.3, hints=rng.random() < 0.6, classic_super=rng.random() < 0.5,
        upcast=rng.random() < 0.5, variant=rng.randrange(12), names=rng.randrange(12), loop=rng.random() < 0.3,
    )
    return draw_surface(rng, style)


def draw_surface(rng: random.Random, style: Style) -> Style:
    """The style with a drawn reference surface, published-scale sizes and offset width; the house
    surface at the verified sizes for HOUSE_SHARE of the draws."""
    house = rng.random() < HOUSE_SHARE
    int64 = rng.random() < INT64_SHARE
    phrasing = rng.randrange(12)
    if house:
        return dataclasses.replace(style, int64=int64, phrasing=phrasing)
    return dataclasses.replace(
        style, ref_doc=rng.choice(REF_DOCS), module_doc=rng.random() < 0.2, ref_comments=rng.random() < 0.4,
        layout="before" if rng.random() < 0.25 else "after", inline_dims=rng.random() < 0.25,
        direct_inputs=rng.random() < 0.45, rand=rng.random() < 0.35,
        ref_hints=rng.choice(("none", "none", "forward", "forward", "all")), compact=rng.random() < 0.2,
        phrasing=phrasing, sizes="small" if rng.random() < SMALL_SHARE else "published", int64=int64)


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
    published: dict[str, object] = field(default_factory=dict)  # constant -> its published-scale value
    rand_ok: bool = True  # plain torch.randn inputs may be drawn with torch.rand instead
    arg_docs: dict[str, str] = field(default_factory=dict)  # constructor argument -> its description
    init_defaults: dict[str, str] = field(default_factory=dict)  # constructor argument -> its default as written


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


def _init_signature(params: list[tuple[str, str]], style: Style, defaults: dict[str, str] | None = None) -> str:
    if not params:
        return "self"
    defaults = defaults or {}

    def one(n: str, t: str) -> str:
        if n in defaults:
            return f"{n}: {t} = {defaults[n]}" if style.hints else f"{n}={defaults[n]}"
        return f"{n}: {t}" if style.hints else n

    return "self, " + ", ".join(one(n, t) for n, t in params)


def _constant(v: object) -> str:
    return repr(v)


def _ref_hints(style: Style) -> tuple[bool, bool]:
    """(hints on forward, hints on __init__) of the reference."""
    if not style.ref_hints:
        return style.hints, style.hints
    return style.ref_hints in ("forward", "all"), style.ref_hints == "all"


def _class_doc_lines(spec: RefSpec, style: Style) -> list[str]:
    if not style.ref_doc:  # the house form
        return ['    """', f"    {spec.doc}", '    """', ""] if style.ref_docstrings else []
    if style.ref_doc == "none":
        return []
    text = surface.class_doc(spec.doc, style.phrasing)
    one_line = style.ref_doc == "line" or (style.ref_doc != "block" and style.phrasing % 2 == 1)
    return surface.docstring([text], "    ", one_line) + ([] if style.compact else [""])


def _method_docs(spec: RefSpec, style: Style) -> tuple[list[str], list[str]]:
    """(__init__ docstring lines, forward docstring lines) of the reference."""
    if not style.ref_doc:
        if style.ref_docstrings and spec.forward_doc:
            return [], ['        """', f"        Returns: {spec.forward_doc}", '        """']
        return [], []
    if style.ref_doc not in ("google", "plain_args", "numpy"):
        return [], []
    kind = style.ref_doc
    n_in = len(spec.forward_args)
    exprs = dict(spec.inputs)
    args = [(a, *surface.input_description(a, i, n_in, exprs.get(a, ""))) for i, a in enumerate(spec.forward_args)]
    fwd = surface.args_block(kind, spec.doc if style.phrasing % 3 else "", args,
                             ("torch.Tensor", surface.returns_text(spec.forward_doc)))
    init: list[str] = []
    if spec.init_params and style.phrasing % 4 != 3:
        params = [(n, t, surface.param_description(n, t, spec.arg_docs)) for n, t in spec.init_params]
        summary = "Initialises the model." if style.phrasing % 2 else ""
        init = surface.docstring(surface.args_block(kind, summary, params, None), "        ")
    return init, surface.docstring(fwd, "        ")


def render_reference(spec: RefSpec, style: Style, published: bool = False) -> str:
    """The reference module; with `published`, its constants at their published-scale values
    (`spec.published`): the same module otherwise, line for line."""
    clash = {n for n, _ in spec.constants} & {v for v, _ in spec.inputs}
    if clash:  # get_inputs would read its own local instead of the module constant
        raise ValueError(f"template bug: input names {sorted(clash)} are also size constants")
    values = dict(spec.constants)
    if published:
        values.update({n: v for n, v in spec.published.items() if n in values})
    inputs = [(v, surface.rand_for_randn(e) if style.rand and spec.rand_ok else e) for v, e in spec.inputs]
    constants = [(n, values[n]) for n, _ in spec.constants]
    if style.inline_dims:
        elsewhere = "\n".join([*spec.init_inputs, *spec.init_lines, *spec.forward_lines])
        names = surface.inline_candidates(spec.constants, [e for _, e in inputs], elsewhere)
        inline = names[1:] if len(names) > 1 else names[: style.phrasing % 2]
        if inline:
            inputs = [(v, surface.substitute(e, {n: values[n] for n in inline})) for v, e in inputs]
            constants = [(n, v) for n, v in constants if n not in inline]
    gap = "\n\n" if style.compact else "\n\n\n"
    fwd_hints, init_hints = _ref_hints(style)

    head = ["import torch", "import torch.nn as nn"] + spec.imports
    if style.module_doc:
        head = surface.docstring([surface.class_doc(spec.doc, style.phrasing + 1)], "", one_line=True) + [""] + head

    cls = ["class Model(nn.Module):"] + _class_doc_lines(spec, style)
    init_doc, fwd_doc = _method_docs(spec, style)
    init_sig = _init_signature(spec.init_params, dataclasses.replace(style, hints=init_hints), spec.init_defaults)
    none_ret = " -> None" if style.ref_hints == "all" and style.phrasing % 2 == 0 else ""
    cls.append(f"    def __init__({init_sig}){none_ret}:")
    cls += init_doc
    cls.append(f"        {_super('Model', style)}")
    cls += [f"        {ln}" for ln in spec.init_lines]
    cls.append("")
    exprs = dict(inputs)
    if fwd_hints:
        sig = ", ".join(f"{a}: {'float' if surface.is_number(exprs.get(a, '')) else 'torch.Tensor'}"
                        for a in spec.forward_args)
    else:
        sig = ", ".join(spec.forward_args)
    ret = " -> torch.Tensor" if fwd_hints else ""
    cls.append(f"    def forward(self, {sig}){ret}:")
    cls += fwd_doc
    if style.ref_comments and style.phrasing % 2 == 0:
        cls.append(f"        # {surface.lower_first(spec.doc).rstrip('.')}")
    cls += [f"        {ln}" for ln in spec.forward_lines]

    const = [f"{n} = {_constant(v)}" + (surface.constant_comment(n, style.phrasing) if style.ref_comments else "")
             for n, v in constants]
    get_inputs = ["def get_inputs():"]
    if style.direct_inputs:
        ret_line = f"    return [{', '.join(e for _, e in inputs)}]"
        if len(ret_line) > 100:
            ret_line = "    return [\n" + "".join(f"        {e},\n" for _, e in inputs) + "    ]"
        get_inputs.append(ret_line)
    else:
        get_inputs += [f"    {v} = {e}" for v, e in inputs]
        get_inputs.append(f"    return [{', '.join(v for v, _ in inputs)}]")
    init_ret = f"    return [{', '.join(spec.init_inputs)}]"
    if style.ref_comments and (not spec.init_inputs or style.phrasing % 3 == 0):
        init_ret += surface.init_inputs_comment(not spec.init_inputs, style.phrasing)
    blocks = ["\n".join(head)]
    if const and style.layout == "before":
        blocks.append("\n".join(const))
    blocks.append("\n".join(cls))
    if const and style.layout != "before":
        blocks.append("\n".join(const))
    blocks += ["\n".join(get_inputs), "\n".join(["def get_init_inputs():", init_ret])]
    return gap.join(blocks) + "\n"


def render_solution(ref: RefSpec, sol: SolSpec, style: Style) -> str:
    imports = ["import torch", "import torch.nn as nn"] + [i for i in sol.imports if "triton" not in i]
    imports += ["import triton", "import triton.language as tl"]
    parts = ["\n".join(dict.fromkeys(imports))]
    # the launch helpers before the kernels: with ModelNew moved first (model/answer_layout.py) each function
    # then follows the line that calls it (forward -> helper -> kernel): its signature comes just after a call
    # that shows its arguments
    parts += [textwrap.dedent(h).strip("\n") for h in sol.helpers]
    parts += [textwrap.dedent(k).strip("\n") for k in sol.kernels]
    cls = ["class ModelNew(nn.Module):"]
    if style.sol_docstrings:
        cls += ['    """', f"    {sol.doc or 'Triton version of Model: ' + ref.doc[0].lower() + ref.doc[1:]}", '    """', ""]
    # ModelNew's signatures are the reference's, character for character (defaults and hints as the
    # reference writes them): what a model must learn is to copy them, never to rewrite them
    init_def, forward_def = _signature_lines(render_reference(ref, style))
    cls.append(init_def)
    cls.append(f"        {_super('ModelNew', style)}")
    init_lines = ref.init_lines if sol.init_lines is None else sol.init_lines
    cls += [f"        {ln}" for ln in init_lines]
    cls.append("")
    cls.append(forward_def)
    cls += [f"        {ln}" if ln else "" for ln in sol.forward_lines]
    parts.append("\n".join(cls))
    return "\n\n\n".join(parts) + "\n"


def _signature_lines(reference: str) -> tuple[str, str]:
    """The `def __init__(...)` and `def forward(...)` lines of a rendered reference."""
    lines = reference.splitlines()
    return (next(ln for ln in lines if ln.startswith("    def __init__(")),
            next(ln for ln in lines if ln.startswith("    def forward(")))


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
    published_reference: str = ""  # the reference at published scale, what a prompt shows ("": `reference`)
    published_shape: dict = field(default_factory=dict)  # `shape` at published scale ({}: the same)
    numel: int = 0  # elements of the largest input at the verified sizes
    published_numel: int = 0  # ... and at published scale

    @property
    def variant(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        return f"dtype={self.dtype} shape={shape} style=({self.style.summary()})"

    @property
    def prompt_reference(self) -> str:
        return self.published_reference or self.reference


def make_example(family: str, ref: RefSpec, sol: SolSpec, style: Style, description: str, dtype: str,
                 shape: dict) -> Example:
    """The example of a template: the reference at the verified sizes and, where the style shows
    published-scale sizes, its published twin (the same module with other constants)."""
    small = dict(ref.constants)
    large = {**small, **ref.published}
    reference = render_reference(ref, style)
    published = render_reference(ref, style, published=True) if ref.published else ""
    pub_shape = {k: large.get(k, v) for k, v in shape.items()} if ref.published else {}
    return Example(family=family, reference=reference, solution=render_solution(ref, sol, style),
                   description=description, dtype=dtype, shape=shape, style=style, published_reference=published,
                   published_shape=pub_shape, numel=largest_input(ref.inputs, small),
                   published_numel=largest_input(ref.inputs, large))


# A template: (rng for shapes and parameters, dtype, style) -> Example
Template = Callable[[random.Random, str, Style], Example]


@dataclass(frozen=True)
class TemplateInfo:
    family: str
    render: Template
    dtypes: tuple[str, ...] = ("float32",)  # dtypes the template (and PyTorch on CPU) supports


def free_names(style: Style, schemes: Sequence[tuple[str, ...]], taken: Sequence[str], salt: int = 0) -> tuple[str, ...]:
    """The style's naming scheme among `schemes`, or the next one whose names are not `taken`."""
    for k in range(len(schemes)):
        names = style.pick_name(schemes, salt=salt + k)
        if not set(names) & set(taken):
            return names
    raise ValueError(f"template bug: every naming scheme clashes with {sorted(taken)}")


def avoid_clashes(style: Style, taken: Sequence[str]) -> Style:
    """The style with its kernel-local names moved off any name the example already uses."""
    taken = set(taken)
    fixes = {}
    for attr, fallback in (("numel", "n_elements"), ("pid", "pid"), ("offs", "offsets"), ("mask", "mask")):
        if getattr(style, attr) in taken:
            fixes[attr] = fallback if fallback not in taken else f"{fallback}_"
    return dataclasses.replace(style, **fixes) if fixes else style
