"""Every figure of the project, each a pure function of already-loaded data: the notebooks and the
report draw the same chart from the same function.

A chart function returns a matplotlib `Figure`, or `NoChart(reason)` when the data hold nothing a
chart could show honestly (no records, a single point where a curve needs two, bars that would all
be zero); the reason is a sentence for the reader, shown where the chart would have been.

Figures are built with the object-oriented API (`matplotlib.figure.Figure`), never pyplot: no
global figure state, no backend to choose (nothing calls `matplotlib.use`), the same PNG in a
notebook, a test or a headless GPU box. `show` puts one inline in a notebook (papermill or
JupyterLab alike) as a PNG, and saves it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure

from ..core.textfmt import duration
from ..eval import metrics as M
from ..train.rl.log import seen_before

STAGE_COLORS = {"base": "#8c8c8c", "sft": "#1f77b4", "rl": "#d62728"}
EXTRA_COLORS = ["#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#bcbd22"]


@dataclass(frozen=True)
class NoChart:
    """Why there is no chart to draw, in a sentence for the reader."""

    reason: str

    def __str__(self) -> str:
        return f"(no chart: {self.reason})"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        # what a notebook shows for a NoChart a cell evaluates to: the sentence, as `show` prints it
        printer.text(str(self))


Chart = Figure | NoChart


def stage_color(model_stage: str, i: int = 0) -> str:
    return STAGE_COLORS.get(model_stage, EXTRA_COLORS[i % len(EXTRA_COLORS)])


def save(fig: Figure, path: Path, dpi: int = 110) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def show(chart: Chart, save_to: Path | None = None) -> Chart:
    """In a notebook: the figure inline as a PNG (saved to `save_to` too), or the reason there is
    none as a line of text."""
    if isinstance(chart, NoChart):
        print(chart)
        return chart
    from IPython.display import Image, display

    if save_to is not None:
        save(chart, Path(save_to))
    display(Image(data=png_bytes(chart)))
    return chart


def _points(n: int, none: str, one: str) -> NoChart | None:
    """A curve needs two points: the sentence for none (`none`) or one (`one`)."""
    if n >= 2:
        return None
    return NoChart(none if n == 0 else f"{one}, and a curve needs at least two points")


# --------------------------------------------------------------------------- data


def difficulty_chart(counts: Mapping[int, int]) -> Chart:
    """How many tasks the difficulty heuristic puts on each level."""
    total = sum(counts.values())
    if not total:
        return NoChart("no tasks were labelled")
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    bars = ax.bar([f"Level {level}" for level in counts], list(counts.values()),
                  color=["#4c72b0", "#dd8452", "#55a868"][:len(counts)])
    ax.bar_label(bars)
    ax.set_ylabel("tasks")
    ax.set_title(f"Heuristic difficulty of {total} tasks")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- evaluation


def funnel_chart(records: Mapping[str, Mapping[str, Any]]) -> Chart:
    """valid -> compiled -> correct -> fast_1 -> fast_2 per model stage, one panel per level
    (all levels first). A step that was not measured (speed without a GPU) is marked n/a."""
    if not records:
        return NoChart("no model has been evaluated yet")
    if not any(v for r in records.values() for _, v in M.funnel(r["metrics"])):
        n = sum(r["metrics"].get("num_samples", 0) for r in records.values())
        return NoChart(f"none of the {n} evaluated samples passed even the first check (valid code), so every "
                       "bar of the funnel would be zero; the examples below show what the models wrote")
    groups = ["all"] + sorted({lvl for r in records.values() for lvl in r["metrics"].get("by_level", {})}, key=int)
    fig = Figure(figsize=(4.2 * len(groups), 3.6))
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    steps = [name for name, _ in M.FUNNEL]
    model_stages = list(records)
    width = 0.8 / max(1, len(model_stages))
    for ax, group in zip(axes, groups):
        for i, model_stage in enumerate(model_stages):
            m = records[model_stage]["metrics"]
            m = m if group == "all" else m.get("by_level", {}).get(group)
            if m is None:
                continue
            xs = [j + (i - (len(model_stages) - 1) / 2) * width for j in range(len(steps))]
            vals = [v for _, v in M.funnel(m)]
            ax.bar(xs, [v or 0.0 for v in vals], width=width * 0.95, color=stage_color(model_stage, i),
                   label=f"{model_stage} ({m.get('num_tasks', '?')} tasks)")
            for x, v in zip(xs, vals):
                ax.annotate("n/a" if v is None else f"{v:.0f}", (x, (v or 0.0) + 1.5), ha="center", fontsize=7,
                            color="#555" if v is None else "black")
        title = "all levels" if group == "all" else f"Level {group}"
        ax.set_title(title)
        ax.set_xticks(range(len(steps)), steps, fontsize=8)
        ax.set_ylim(0, 108)
        ax.set_ylabel("% of samples")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper right")
    unmeasured = any(v is None for r in records.values() for _, v in M.funnel(r["metrics"]))
    fig.suptitle("Evaluation funnel" + (" (n/a: speed not measured, no GPU timing)" if unmeasured else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


def speedup_chart(records: Mapping[str, Mapping[str, Any]]) -> Chart:
    """Distribution of the measured speedups of correct samples, per model stage (log scale)."""
    rows = [r for rec in records.values() for r in rec["detailed_results"]]
    data = {s: [r["speedup"] for r in rec["detailed_results"] if r.get("correct") and r.get("speedup")]
            for s, rec in records.items()}
    data = {s: v for s, v in data.items() if v}
    if not data:
        if not any(r.get("correct") for r in rows):
            return NoChart("no sample was correct, and only correct kernels are timed")
        return NoChart("no correct kernel was timed: timing runs only on a GPU")
    lo = min(min(v) for v in data.values())
    hi = max(max(v) for v in data.values())
    lo, hi = min(lo, 0.5), max(hi, 2.0)
    bins = [lo * (hi / lo) ** (i / 24) for i in range(25)]
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    for i, (model_stage, vals) in enumerate(data.items()):
        gm = M.geomean(vals)
        ax.hist(vals, bins=bins, alpha=0.55, color=stage_color(model_stage, i),
                label=f"{model_stage}: {len(vals)} timed, geomean {gm:.2f}x")
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.axvline(2.0, color="grey", lw=1, ls=":")
    ax.set_xlabel("speedup over the PyTorch reference (log scale; dashed 1x, dotted 2x)")
    ax.set_ylabel("correct samples")
    ax.set_title("Speedup of correct kernels")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def failure_chart(records: Mapping[str, Mapping[str, Any]], top: int = 8,
                  explain: Any = None) -> Chart:
    """The most common reasons samples were not correct (the verifier's reason codes), per model
    stage. `explain(reason)` may turn a reason into words for the one-reason sentence."""
    per_stage = {s: M.failure_reasons(rec["detailed_results"], top=top, detail=True) for s, rec in records.items()}
    per_stage = {s: v for s, v in per_stage.items() if v}
    if not per_stage:
        return NoChart("no sample failed" if records else "no model has been evaluated yet")
    if all(len(v) == 1 for v in per_stage.values()):
        said = "; ".join(f"{s}: all {v[0][1]} failed samples, {v[0][0]}"
                         + (f" ({explain(v[0][0])})" if explain else "") for s, v in per_stage.items())
        return NoChart(f"each model's failed samples all failed for one reason, so there is nothing to compare "
                       f"({said})")
    tallest = max(len(v) for v in per_stage.values())
    fig = Figure(figsize=(4.2 * len(per_stage), 0.4 * tallest + 1.4))
    axes = fig.subplots(1, len(per_stage), squeeze=False)[0]
    for i, (ax, (model_stage, reasons)) in enumerate(zip(axes, per_stage.items())):
        total = sum(not r["correct"] for r in records[model_stage]["detailed_results"])
        names = [n for n, _ in reasons][::-1]
        counts = [c for _, c in reasons][::-1]
        ax.barh(names, counts, color=stage_color(model_stage, i), height=0.6)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{model_stage}: {total} failed samples", fontsize=9)
        ax.set_xlabel("samples")
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("Why samples failed (the verifier's reason)", fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- training


def sft_loss_chart(rows: Sequence[Mapping[str, Any]]) -> Chart:
    """SFT training loss and learning rate against the optimizer step (train/sft/log.py's records);
    the held-out slice's loss beside the training loss when it was logged (rising while training
    falls is over-fitting); a dotted line where a resumed session began."""
    pts = [(r["step"], r["loss"]) for r in rows if r.get("loss") is not None and r.get("step") is not None]
    missing = _points(len(pts), "no SFT loss logged yet", "SFT logged its loss at one step only")
    if missing:
        return missing
    fig = Figure(figsize=(10, 3.4))
    ax, ax_lr = fig.subplots(1, 2)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 30 else None, lw=1.5,
            label="training")
    evals = [(r["step"], r["eval_loss"]) for r in rows if r.get("eval_loss") is not None and r.get("step") is not None]
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], marker="s", lw=1.5, color="tab:red",
                label="held-out slice")
        ax.legend(fontsize=8)
    first: dict[int, int] = {}
    for r in rows:
        if r.get("step") is not None:
            first.setdefault(r.get("session", 1), r["step"])
    for session, step in first.items():
        if session and session > 1:
            ax.axvline(step, color="grey", ls=":", lw=1)  # where a resumed session began
    ax.set_xlabel("optimizer step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("training loss (completion tokens)")
    ax.set_title(f"SFT loss: {pts[0][1]:.3f} -> {pts[-1][1]:.3f}")
    ax.grid(alpha=0.3)
    lrs = [(r["step"], r["learning_rate"]) for r in rows
           if r.get("learning_rate") is not None and r.get("step") is not None]
    ax_lr.plot([s for s, _ in lrs], [v for _, v in lrs], color="tab:orange", lw=1.5)
    ax_lr.set_xlabel("optimizer step")
    ax_lr.xaxis.get_major_locator().set_params(integer=True)
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_title("SFT learning rate")
    ax_lr.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def linear_trend(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[float, float] | None:
    """(slope, intercept) of the least-squares line through the points with a value; None under two."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    if den == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in pts) / den
    return slope, my - slope * mx


def rl_chart(rows: Sequence[Mapping[str, Any]]) -> Chart:
    """The RL log (train/rl/log.py's records), one point per round or step: mean reward and
    correct rate (overall, its trend, per level); where the time of each went (generation,
    verification not hidden behind it, the update) when timed; how many groups carried a learning
    signal when logged. One panel each."""
    rows = [r for r in rows if r.get("mean_reward") is not None or r.get("correct_rate") is not None]
    key = "round" if rows and "round" in rows[0] else "step"
    missing = _points(len(rows), "no RL round or step logged yet",
                      "RL ran one best-of-N round (rounds = 1)" if key == "round" else "RL ran one GRPO step")
    if missing:
        return missing
    xs = [r.get(key) for r in rows]
    timed = any(r.get("timing") for r in rows)
    signal = any(r.get("signal") for r in rows)
    fig = Figure(figsize=(6.5 + 5.0 * (timed + signal), 3.6))
    axes = list(fig.subplots(1, 1 + timed + signal, squeeze=False)[0])
    ax = axes.pop(0)
    marker = "o" if len(rows) < 30 else None
    ax.plot(xs, [r.get("mean_reward") for r in rows], marker=marker, label="mean reward", color="black")
    rates = [r.get("correct_rate") for r in rows]
    ax.plot(xs, rates, marker=marker, label="correct rate", color="tab:red")
    fit = linear_trend(xs, rates)
    if fit is not None:
        slope, icept = fit
        ax.plot([xs[0], xs[-1]], [icept + slope * xs[0], icept + slope * xs[-1]], color="grey", ls="-.",
                label=f"correct-rate trend ({slope:+.3f} per {key})")
    again = seen_before(rows)  # the frontier keeps each step's rate mid-way: the same tasks met again
    if sum(a is not None for a in again) >= 2:
        ax.plot(xs, [a and a["now"] for a in again], marker="s" if marker else None, color="tab:blue",
                label="tasks drawn before: correct rate now")
        ax.plot(xs, [a and a["first"] for a in again], ls="--", color="tab:blue", alpha=0.6,
                label="the same tasks at their first draw")
    levels = sorted({lvl for r in rows for lvl in (r.get("by_level") or {})}, key=str)
    for lvl, style in zip(levels, (":", "--", (0, (1, 3)))):
        ys = [(r.get("by_level") or {}).get(lvl, {}).get("correct_rate") for r in rows]
        ax.plot(xs, ys, ls=style, marker=marker, label=f"correct rate, Level {lvl}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(key)
    ax.xaxis.get_major_locator().set_params(integer=True)
    method = {"best_of_n": "best-of-N", "grpo": "GRPO"}.get(rows[0].get("method"), rows[0].get("method", "RL"))
    ax.set_title(f"RL ({method}) on its training samples")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if timed:
        _rl_time_panel(axes.pop(0), rows, xs, key)
    if signal:
        _rl_signal_panel(axes.pop(0), rows, xs, key)
    fig.tight_layout()
    return fig


def _rl_time_panel(ax, rows: Sequence[Mapping[str, Any]], xs: list, key: str) -> None:
    """Stacked seconds per round or step: the policy writing, verification it waited for, the
    update; the verifier's busy time (mostly overlapped with writing) as crosses."""
    timing = [r.get("timing") or {} for r in rows]
    parts = {"generate": [float(t.get("generate_s", 0.0)) + float(t.get("refine_generate_s", 0.0)) for t in timing],
             "verify (waited)": [float(t.get("verify_wait_s", 0.0)) for t in timing],
             "train": [float(t.get("train_s", 0.0)) for t in timing]}
    bottom = [0.0] * len(xs)
    for name, values in parts.items():
        ax.bar(xs, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.plot(xs, [float(t.get("verify_s", 0.0)) for t in timing], color="black", marker="x", ls="",
            label="verifier busy (overlapped)")
    ax.set_xlabel(key)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("seconds")
    ax.set_title(f"Where each {key}'s time went")
    ax.legend(fontsize=8)


def _rl_signal_panel(ax, rows: Sequence[Mapping[str, Any]], xs: list, key: str) -> None:
    """Groups per round or step, those with a learning signal after redraws, and on the first draw."""
    sig = [r.get("signal") or {} for r in rows]
    ax.bar(xs, [s.get("groups", 0) for s in sig], color="lightgrey", label="groups")
    ax.bar(xs, [s.get("with_signal", 0) for s in sig], color="tab:green", label="with signal (after redraws)")
    ax.plot(xs, [s.get("first_draw_with_signal", 0) for s in sig], color="black", marker="o", ls="",
            label="with signal (first draw)")
    ax.set_xlabel(key)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    rule = next((s["rule"] for s in sig if s.get("rule")), "")
    ax.set_title("Groups carrying a learning signal" + (f"\n({rule})" if rule else ""), fontsize=10)
    ax.legend(fontsize=8)


def curriculum_chart(rows: Sequence[Mapping[str, Any]], trigger: float | None = None) -> Chart:
    """P(Level 2) used at each step and the running Level-1 correct rate that drives it."""
    rows = [r for r in rows if r.get("step") is not None]
    missing = _points(len(rows), "no curriculum step logged yet", "the curriculum logged one step only")
    if missing:
        return missing
    xs = [r["step"] for r in rows]
    fig = Figure(figsize=(6.5, 3.4))
    ax = fig.subplots()
    ax.step(xs, [r.get("p_level2") for r in rows], where="post", label="P(Level 2) drawn with", lw=2)
    run = [(x, r.get("running_l1_rate")) for x, r in zip(xs, rows) if r.get("running_l1_rate") is not None]
    if run:
        ax.plot([p[0] for p in run], [p[1] for p in run], marker=".", label="running Level-1 correct rate")
    if trigger is not None:
        ax.axhline(trigger, color="grey", ls="--", lw=1, label=f"trigger {trigger:g}")
    trig = next((r["triggered_at"] for r in rows if r.get("triggered_at") is not None), None)
    if trig is not None:
        ax.axvline(trig, color="grey", ls=":", lw=1, label=f"triggered at step {trig}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("curriculum step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Curriculum: share of Level-2 tasks drawn")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def timing_chart(timings: Mapping[str, Mapping[str, Any]]) -> Chart:
    items = [(name, float(t.get("wall_s", 0.0))) for name, t in sorted(timings.items())]
    if len(items) < 2:
        return NoChart("no notebook timed yet" if not items else
                       f"only {items[0][0]} was timed ({duration(items[0][1])}); the table says it all")
    fig = Figure(figsize=(6.5, 0.45 * len(items) + 1.2))
    ax = fig.subplots()
    ax.barh([n for n, _ in items][::-1], [w / 60 for _, w in items][::-1], color="#4c72b0")
    for y, (_, w) in enumerate(items[::-1]):
        ax.annotate(duration(w), (w / 60, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max(w for _, w in items) / 60 * 1.2)  # room for the labels
    ax.set_xlabel("minutes")
    ax.set_title(f"Wall-clock per notebook (total {duration(sum(w for _, w in items))})")
    fig.tight_layout()
    return fig


def _leading_number(cell: Any) -> float | None:
    """17.0 from "17.0 [8.0, 27.0]", 65.0 from 65.0; None from "not measured ..." or n/a."""
    if isinstance(cell, (int, float)):
        return float(cell)
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", str(cell or ""))
    return float(m.group(1)) if m else None


def reference_chart(ref: Mapping[str, Any]) -> Chart:
    """A kept GPU run's figures (report/reference_run.py): on held-out KernelBench, valid and correct %
    per model and level (an unmeasured rate marked n/a); on the development set, each SFT variant's
    correct %."""
    kb = ref.get("tables", {}).get("kernelbench") or []
    dev = ref.get("tables", {}).get("dev_set") or []
    if not kb and not dev:
        return NoChart("the kept run holds no KernelBench or development-set table")
    panels = [p for p in (("kb", kb), ("dev", dev)) if p[1]]
    fig = Figure(figsize=(5.2 * len(panels), 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (kind, rows) in zip(axes, panels):
        if kind == "kb":
            labels = [f"{r['stage'].split(' ')[0]} {r['level']}" for r in rows]
            for k, (key, color) in enumerate((("valid %", "#9ecae1"), ("correct % [95% CI]", "#31a354"))):
                vals = [_leading_number(r.get(key)) for r in rows]
                xs = [i + (k - 0.5) * 0.4 for i in range(len(rows))]
                ax.bar(xs, [v or 0.0 for v in vals], width=0.38, color=color, label=key.split(" [")[0])
                for x, v in zip(xs, vals):
                    ax.annotate("n/a" if v is None else f"{v:.0f}", (x, (v or 0.0) + 1.5), ha="center", fontsize=7)
            ax.set_xticks(range(len(rows)), labels, fontsize=8)
            ax.set_title("held-out KernelBench, published sizes", fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
        else:
            labels = [r["SFT variant"].replace(" (chosen)", "\n(chosen)") for r in rows]
            vals = [_leading_number(r.get("dev correct % [95% CI]")) for r in rows]
            ax.bar(range(len(rows)), [v or 0.0 for v in vals], color="#31a354")
            for x, v in enumerate(vals):
                ax.annotate("n/a" if v is None else f"{v:.1f}", (x, (v or 0.0) + 1.5), ha="center", fontsize=8)
            ax.set_xticks(range(len(rows)), labels, fontsize=7)
            ax.set_title("SFT variants on the development set: correct %", fontsize=9)
        ax.set_ylim(0, 108)
        ax.set_ylabel("% of samples")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Another run, kept in the repository: measured {ref.get('measured', '?')} on "
                 f"{ref.get('machine', '?')}", fontsize=9)
    fig.tight_layout()
    return fig
