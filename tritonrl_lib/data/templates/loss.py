"""Loss templates: a whole tensor (or batch of rows) reduced to one mean value.

Two ways to reduce, both all-Triton: one program walking the input in blocks (deterministic), or
one program per block / row adding its share into a zeroed scalar with `tl.atomic_add`. Row losses
(cross-entropy, cosine similarity, KL divergence) take one row per step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from . import scale
from .base import Example, RefSpec, SolSpec, Style, TemplateInfo, comment, make_example, randn

SIZES = [("batch_size", "dim"), ("N", "D"), ("batch", "features"), ("batch_size", "num_classes"),
         ("batch_size", "input_dim"), ("B", "D"), ("batch_size", "dim")]
FLAT_SIZES = [("batch_size", "dim"), ("N", "D"), ("batch", "features"), ("batch_size", "input_dim"), ("B", "D")]
Form = "str | tuple[str, str]"  # a return expression over predictions / targets, or (init line, expression)


@dataclass
class FlatLoss:
    family: str
    doc: str
    forms: list  # of Form: reference return expressions over predictions / targets
    term: str  # Triton expression of one element's loss over p, t
    targets: str  # randn | sign


FLAT = [
    FlatLoss("mse_loss", "Mean squared error between predictions and targets.",
             ["torch.mean((predictions - targets) ** 2)", "F.mse_loss(predictions, targets)",
              ("self.loss_fn = nn.MSELoss()", "self.loss_fn(predictions, targets)"),
              "((predictions - targets) ** 2).mean()", ("self.criterion = nn.MSELoss(reduction=\"mean\")",
                                                         "self.criterion(predictions, targets)")],
             "(p - t) * (p - t)", "randn"),
    FlatLoss("l1_loss", "Mean absolute error between predictions and targets.",
             ["torch.mean(torch.abs(predictions - targets))", "F.l1_loss(predictions, targets)",
              ("self.loss_fn = nn.L1Loss()", "self.loss_fn(predictions, targets)"),
              "(predictions - targets).abs().mean()"],
             "tl.abs(p - t)", "randn"),
    FlatLoss("smooth_l1_loss", "Smooth L1 (Huber, beta=1) loss between predictions and targets.",
             ["F.smooth_l1_loss(predictions, targets)", "torch.nn.functional.smooth_l1_loss(predictions, targets)",
              ("self.loss_fn = nn.SmoothL1Loss()", "self.loss_fn(predictions, targets)"),
              "F.smooth_l1_loss(predictions, targets, beta=1.0)"],
             "tl.where(tl.abs(p - t) < 1.0, 0.5 * (p - t) * (p - t), tl.abs(p - t) - 0.5)", "randn"),
    FlatLoss("hinge_loss", "Hinge loss for targets in {-1, 1}.",
             ["torch.mean(torch.clamp(1 - predictions * targets, min=0))",
              "torch.clamp(1 - predictions * targets, min=0).mean()", "F.relu(1 - predictions * targets).mean()"],
             "tl.maximum(1.0 - p * t, 0.0)", "sign"),
]
PT_NAMES = [("predictions", "targets"), ("pred", "target"), ("preds", "labels"), ("predictions", "targets"),
            ("input", "target"), ("y_pred", "y_true"), ("output", "target"), ("predictions", "targets")]


def _names(style: Style) -> tuple[str, str]:
    return style.pick_name(PT_NAMES, salt=1)


def _form(style: Style, forms: list, p: str, t: str) -> tuple[list[str], str]:
    """(the reference's own __init__ lines, its return expression) over the inputs `p`, `t`."""
    form = style.pick(forms)
    init, expr = form if isinstance(form, tuple) else ("", form)
    return ([init] if init else []), expr.replace("predictions", p).replace("targets", t)


def _wrap(family: str, kname: str, style: Style, params: list[str], launch: list[str], call: list[str]):
    if style.launcher == "inline":
        return [], launch
    fn = style.pick_name(("{}", "triton_{}", "launch_{}"), salt=3).format(family)
    if fn == kname:
        fn = f"launch_{family}"
    return [f"def {fn}({', '.join(params)}):\n" + "\n".join(f"    {ln}" for ln in launch) + "\n"], \
        [f"return {fn}({', '.join(call)})"]


def render_flat(loss: FlatLoss, rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = style.pick_name(FLAT_SIZES)
    p, t = _names(style)
    dims = [rng.choice((4, 8, 16, 32)), rng.choice((16, 33, 64, 128))]
    target_expr = (randn(list(sizes), dtype) if loss.targets == "randn"
                   else f"torch.randint(0, 2, ({', '.join(sizes)},)).to({'torch.float32' if dtype == 'float32' else 'torch.' + dtype}) * 2 - 1")
    own_init, expr = _form(style, loss.forms, p, t)
    ref = RefSpec(doc=loss.doc, init_params=[], init_lines=own_init, forward_args=[p, t],
                  forward_lines=[f"return {expr}"],
                  constants=list(zip(sizes, dims)), inputs=[(p, randn(list(sizes), dtype)), (t, target_expr)],
                  init_inputs=[], forward_doc="a scalar tensor.",
                  imports=["import torch.nn.functional as F"] if "F." in expr else [])
    if style.sizes == "published":
        ref.published = dict(zip(sizes, scale.draw(rng, (scale.ROWS, (1024, 4096, 8192, 16384, 32768)),
                                                    cap=scale.INT32_SAFE - 1)))
    kname = style.kernel(loss.family)
    pp, tp, op, b, n = style.ptr(p), style.ptr(t), style.ptr("loss"), style.block, style.numel
    if n in sizes:
        n = "n_elements"
    atomic = style.variant % 2 == 1
    if atomic:
        offsets = "\n".join(f"    {ln}" for ln in scale.block_offsets(style, "pid", b, "offs"))
        kernel = f"""
@triton.jit
def {kname}({pp}, {tp}, {op}, {n}, {b}: tl.constexpr):
{comment(style, "each program sums its block's terms and adds its share of the mean into the scalar output")}    pid = tl.program_id(axis=0)
{offsets}
    mask = offs < {n}
    p = tl.load({pp} + offs, mask=mask, other=0.0).to(tl.float32)
    t = tl.load({tp} + offs, mask=mask, other=0.0).to(tl.float32)
    term = tl.where(mask, {loss.term}, 0.0)
    tl.atomic_add({op}, tl.sum(term, axis=0) / {n})
"""
        launch = [f"{p}, {t} = {p}.contiguous(), {t}.contiguous()", f"{n} = {p}.numel()",
                  f"acc = torch.zeros((), device={p}.device, dtype=torch.float32)",
                  f"grid = (triton.cdiv({n}, {style.block_size}),)",
                  f"{kname}[grid]({p}, {t}, acc, {n}, {b}={style.block_size})", f"return acc.to({p}.dtype)"]
    else:
        kernel = f"""
@triton.jit
def {kname}({pp}, {tp}, {op}, {n}, {b}: tl.constexpr):
{comment(style, "a single program walks the input block by block, so the sum is deterministic")}    acc = tl.zeros(({b},), dtype=tl.float32)
    for start in range(0, {n}, {b}):
        offs = start + tl.arange(0, {b})
        mask = offs < {n}
        p = tl.load({pp} + offs, mask=mask, other=0.0).to(tl.float32)
        t = tl.load({tp} + offs, mask=mask, other=0.0).to(tl.float32)
        acc += tl.where(mask, {loss.term}, 0.0)
    tl.store({op}, tl.sum(acc, axis=0) / {n})
"""
        launch = [f"{p}, {t} = {p}.contiguous(), {t}.contiguous()", f"{n} = {p}.numel()",
                  f"out = torch.empty((), device={p}.device, dtype={p}.dtype)",
                  f"{kname}[(1,)]({p}, {t}, out, {n}, {b}={style.block_size})", "return out"]
    helpers, forward = _wrap(loss.family, kname, style, [p, t], launch, [p, t])
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    return make_example(loss.family, ref, sol, style, loss.doc, dtype, dict(zip(sizes, dims)))


# --------------------------------------------------------------------------- row losses


@dataclass
class RowLoss:
    family: str
    doc: str
    forms: list[str]
    inputs: Callable[[list[str], str, str, str], list[tuple[str, str]]]
    row_lines: list[str]  # from loaded rows p (and t) to `row_loss`
    target_int: bool = False
    divide_by_rows: bool = True


def _ce_inputs(sizes, p, t, dtype):
    return [(p, randn(sizes, dtype)), (t, f"torch.randint(0, {sizes[1]}, ({sizes[0]},))")]


def _cos_inputs(sizes, p, t, dtype):
    return [(p, randn(sizes, dtype)), (t, randn(sizes, dtype))]


def _kl_inputs(sizes, p, t, dtype):
    return [(p, f"torch.softmax({randn(sizes, dtype)}, dim=-1)"), (t, f"torch.softmax({randn(sizes, dtype)}, dim=-1)")]


ROW = [
    RowLoss("cross_entropy", "Cross-entropy between class logits and integer targets (mean over the batch).",
            ["F.cross_entropy(predictions, targets)", "torch.nn.functional.cross_entropy(predictions, targets)",
             ("self.loss_fn = nn.CrossEntropyLoss()", "self.loss_fn(predictions, targets)")],
            _ce_inputs,
            ["row_max = tl.max(p, axis=0)",
             "lse = row_max + tl.log(tl.sum(tl.where(mask, tl.exp(p - row_max), 0.0), axis=0))",
             "target = tl.load(t_ptr + row)",
             "picked = tl.sum(tl.where(cols == target, p, 0.0), axis=0)",
             "row_loss = lse - picked"], target_int=True),
    RowLoss("cosine_similarity", "One minus the cosine similarity of paired rows, averaged over the batch.",
            ["torch.mean(1 - F.cosine_similarity(predictions, targets, dim=1))",
             ("self.cos = nn.CosineSimilarity(dim=1)", "torch.mean(1 - self.cos(predictions, targets))"),
             "(1 - F.cosine_similarity(predictions, targets, dim=1)).mean()"], _cos_inputs,
            ["dot = tl.sum(p * t, axis=0)",
             "norms = tl.maximum(tl.sqrt(tl.sum(p * p, axis=0)) * tl.sqrt(tl.sum(t * t, axis=0)), 1e-8)",
             "row_loss = 1.0 - dot / norms"]),
    RowLoss("kl_div", "KL divergence between two distributions per row (batchmean), predictions as probabilities.",
            ["F.kl_div(torch.log(predictions), targets, reduction=\"batchmean\")",
             ("self.kl = nn.KLDivLoss(reduction=\"batchmean\")", "self.kl(torch.log(predictions), targets)"),
             "F.kl_div(predictions.log(), targets, reduction=\"batchmean\")"], _kl_inputs,
            ["term = tl.where(mask, t * (tl.log(tl.where(mask, t, 1.0)) - tl.log(tl.where(mask, p, 1.0))), 0.0)",
             "row_loss = tl.sum(term, axis=0)"]),
]


def render_row_loss(loss: RowLoss, rng: random.Random, dtype: str, style: Style) -> Example:
    sizes = list(style.pick_name(SIZES[1:] if loss.target_int else FLAT_SIZES))
    if loss.target_int and sizes[1] != "num_classes":
        sizes[1] = "num_classes"
    p, t = _names(style)
    dims = [rng.choice((4, 8, 16, 32)), rng.choice((10, 16, 33, 64))]
    own_init, expr = _form(style, loss.forms, p, t)
    ref = RefSpec(doc=loss.doc, init_params=[], init_lines=own_init, forward_args=[p, t],
                  forward_lines=[f"return {expr}"],
                  constants=list(zip(sizes, dims)), inputs=loss.inputs(sizes, p, t, dtype), init_inputs=[],
                  forward_doc="a scalar tensor.", imports=["import torch.nn.functional as F"] if "F." in expr else [])
    if style.sizes == "published":  # a row is loaded whole: rows stay <= 4096 long, their count grows
        cols = (10, 100, 1000, 1024, 4096) if loss.target_int else scale.ROW_LEN
        ref.published = dict(zip(sizes, scale.draw(rng, (scale.ROWS, cols), cap=scale.INT32_SAFE - 1)))
    kname = style.kernel(loss.family)
    pp, op = style.ptr(p), style.ptr("loss")
    b = style.block
    other = '-float("inf")' if loss.family == "cross_entropy" else "0.0"
    load_t = "" if loss.target_int else \
        f"        t = tl.load(t_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)\n"
    load_t_atomic = load_t.replace("        ", "    ", 1)
    rows_body = "\n".join(f"        {ln}" for ln in loss.row_lines)
    atomic = style.variant % 2 == 1
    if atomic:
        kernel = f"""
@triton.jit
def {kname}({pp}, t_ptr, {op}, n_rows, n_cols, {b}: tl.constexpr):
{comment(style, "one program per row; each adds row_loss / n_rows into the scalar output")}    row = tl.program_id(0){".to(tl.int64)" if style.int64 else ""}
    cols = tl.arange(0, {b})
    mask = cols < n_cols
    p = tl.load({pp} + row * n_cols + cols, mask=mask, other={other}).to(tl.float32)
{load_t_atomic}{chr(10).join(f"    {ln}" for ln in loss.row_lines)}
    tl.atomic_add({op}, row_loss / n_rows)
"""
        launch = [f"{p}, {t} = {p}.contiguous(), {t}.contiguous()", f"n_rows, n_cols = {p}.shape",
                  f"acc = torch.zeros((), device={p}.device, dtype=torch.float32)",
                  f"{kname}[(n_rows,)]({p}, {t}, acc, n_rows, n_cols, {b}=triton.next_power_of_2(n_cols))",
                  f"return acc.to({p}.dtype)"]
    else:
        kernel = f"""
@triton.jit
def {kname}({pp}, t_ptr, {op}, n_rows, n_cols, {b}: tl.constexpr):
{comment(style, "a single program visits the rows in order and averages their losses")}    cols = tl.arange(0, {b})
    mask = cols < n_cols
    total = 0.0
    for row in range(n_rows):
        p = tl.load({pp} + row * n_cols + cols, mask=mask, other={other}).to(tl.float32)
{load_t}{rows_body}
        total += row_loss
    tl.store({op}, total / n_rows)
"""
        launch = [f"{p}, {t} = {p}.contiguous(), {t}.contiguous()", f"n_rows, n_cols = {p}.shape",
                  f"out = torch.empty((), device={p}.device, dtype={p}.dtype)",
                  f"{kname}[(1,)]({p}, {t}, out, n_rows, n_cols, {b}=triton.next_power_of_2(n_cols))", "return out"]
    helpers, forward = _wrap(loss.family, kname, style, [p, t], launch, [p, t])
    sol = SolSpec(kernels=[kernel], helpers=helpers, forward_lines=forward, init_lines=None)
    return make_example(loss.family, ref, sol, style, loss.doc, dtype, dict(zip(sizes, dims)))


def templates() -> list[TemplateInfo]:
    out = [TemplateInfo(f.family, lambda rng, d, s, f=f: render_flat(f, rng, d, s), ("float32", "float16"))
           for f in FLAT]
    out += [TemplateInfo(r.family, lambda rng, d, s, r=r: render_row_loss(r, rng, d, s), ("float32",)) for r in ROW]
    return out
