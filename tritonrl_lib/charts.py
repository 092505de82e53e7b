"""The report's charts, each a pure function of already-loaded data returning a matplotlib Figure.

Figures are built with the object-oriented API (`matplotlib.figure.Figure`), never pyplot: no
global figure state, no GUI backend, the same PNG in a notebook, a test or a headless GPU box.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure

from . import metrics as M

STAGE_COLORS = {"base": "#8c8c8c", "sft": "#1f77b4", "rl": "#d62728"}
EXTRA_COLORS = ["#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#bcbd22"]


def stage_color(stage: str, i: int = 0) -> str:
    return STAGE_COLORS.get(stage, EXTRA_COLORS[i % len(EXTRA_COLORS)])


def save(fig: Figure, path: Path, dpi: int = 110) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


# --------------------------------------------------------------------------- evaluation


def funnel_chart(records: Mapping[str, Mapping[str, Any]]) -> Figure:
    """valid -> compiled -> correct -> fast_1 -> fast_2 per model stage, one panel per level
    (all levels first). A step that was not measured (speed without a GPU) is marked n/a."""
    groups = ["all"] + sorted({lvl for r in records.values() for lvl in r["metrics"].get("by_level", {})}, key=int)
    fig = Figure(figsize=(4.2 * len(groups), 3.6))
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    steps = [name for name, _ in M.FUNNEL]
    stages = list(records)
    width = 0.8 / max(1, len(stages))
    for ax, group in zip(axes, groups):
        for i, stage in enumerate(stages):
            m = records[stage]["metrics"]
            m = m if group == "all" else m.get("by_level", {}).get(group)
            if m is None:
                continue
            xs = [j + (i - (len(stages) - 1) / 2) * width for j in range(len(steps))]
            vals = [v for _, v in M.funnel(m)]
            ax.bar(xs, [v or 0.0 for v in vals], width=width * 0.95, color=stage_color(stage, i),
                   label=f"{stage} ({m.get('num_tasks', '?')} tasks)")
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


def speedup_chart(records: Mapping[str, Mapping[str, Any]]) -> Figure | None:
    """Distribution of the measured speedups of correct samples, per stage (log scale); None when
    nothing was timed (a CPU run)."""
    data = {s: [r["speedup"] for r in rec["detailed_results"] if r.get("correct") and r.get("speedup")]
            for s, rec in records.items()}
    data = {s: v for s, v in data.items() if v}
    if not data:
        return None
    lo = min(min(v) for v in data.values())
    hi = max(max(v) for v in data.values())
    lo, hi = min(lo, 0.5), max(hi, 2.0)
    bins = [lo * (hi / lo) ** (i / 24) for i in range(25)]
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    for i, (stage, vals) in enumerate(data.items()):
        gm = M.geomean(vals)
        ax.hist(vals, bins=bins, alpha=0.55, color=stage_color(stage, i),
                label=f"{stage}: {len(vals)} timed, geomean {gm:.2f}x")
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.axvline(2.0, color="grey", lw=1, ls=":")
    ax.set_xlabel("speedup over the PyTorch reference (log scale; dashed 1x, dotted 2x)")
    ax.set_ylabel("correct samples")
    ax.set_title("Speedup of correct kernels")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def failure_chart(records: Mapping[str, Mapping[str, Any]], top: int = 8) -> Figure | None:
    """The most common reasons samples were not correct, per stage."""
    per_stage = {s: M.failure_reasons(rec["detailed_results"], top=top) for s, rec in records.items()}
    per_stage = {s: v for s, v in per_stage.items() if v}
    if not per_stage:
        return None
    tallest = max(len(v) for v in per_stage.values())
    fig = Figure(figsize=(4.2 * len(per_stage), 0.4 * tallest + 1.4))
    axes = fig.subplots(1, len(per_stage), squeeze=False)[0]
    for i, (ax, (stage, reasons)) in enumerate(zip(axes, per_stage.items())):
        total = sum(not r["correct"] for r in records[stage]["detailed_results"])
        names = [n for n, _ in reasons][::-1]
        counts = [c for _, c in reasons][::-1]
        ax.barh(names, counts, color=stage_color(stage, i), height=0.6)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{stage}: {total} failed samples", fontsize=9)
        ax.set_xlabel("samples")
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("Why samples failed (reason, grouped by its first part)", fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- training


def sft_loss_chart(rows: Sequence[Mapping[str, Any]]) -> Figure | None:
    pts = [(r["step"], r["loss"]) for r in rows if r.get("loss") is not None and r.get("step") is not None]
    if not pts:
        return None
    fig = Figure(figsize=(6.5, 3.4))
    ax = fig.subplots()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 30 else None, lw=1.5)
    first = {}
    for r in rows:
        if r.get("step") is not None:
            first.setdefault(r.get("session", 1), r["step"])
    for session, step in first.items():
        if session and session > 1:
            ax.axvline(step, color="grey", ls=":", lw=1)
    ax.set_xlabel("optimizer step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("training loss (completion tokens)")
    ax.set_title(f"SFT loss: {pts[0][1]:.3f} -> {pts[-1][1]:.3f}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def rl_chart(rows: Sequence[Mapping[str, Any]]) -> Figure | None:
    """Mean reward and correct rate (overall and per level) per RL round or step."""
    rows = [r for r in rows if r.get("mean_reward") is not None or r.get("correct_rate") is not None]
    if not rows:
        return None
    key = "round" if "round" in rows[0] else "step"
    xs = [r.get(key) for r in rows]
    fig = Figure(figsize=(6.5, 3.4))
    ax = fig.subplots()
    marker = "o" if len(rows) < 30 else None
    ax.plot(xs, [r.get("mean_reward") for r in rows], marker=marker, label="mean reward", color="black")
    ax.plot(xs, [r.get("correct_rate") for r in rows], marker=marker, label="correct rate", color="tab:red")
    levels = sorted({lvl for r in rows for lvl in (r.get("by_level") or {})}, key=str)
    for lvl, style in zip(levels, (":", "--", "-.")):
        ys = [(r.get("by_level") or {}).get(lvl, {}).get("correct_rate") for r in rows]
        ax.plot(xs, ys, ls=style, marker=marker, label=f"correct rate L{lvl}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(key)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"RL ({rows[0].get('method', 'rl')}) on its training samples")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def curriculum_chart(rows: Sequence[Mapping[str, Any]], trigger: float | None = None) -> Figure | None:
    """P(Level 2) used at each step and the running Level-1 correct rate that drives it."""
    rows = [r for r in rows if r.get("step") is not None]
    if not rows:
        return None
    xs = [r["step"] for r in rows]
    fig = Figure(figsize=(6.5, 3.4))
    ax = fig.subplots()
    ax.step(xs, [r.get("p_level2") for r in rows], where="post", label="P(Level 2) drawn with", lw=2)
    run = [(x, r.get("running_l1_rate")) for x, r in zip(xs, rows) if r.get("running_l1_rate") is not None]
    if run:
        ax.plot([p[0] for p in run], [p[1] for p in run], marker=".", label="running L1 correct rate")
    if trigger is not None:
        ax.axhline(trigger, color="grey", ls="--", lw=1, label=f"trigger {trigger:g}")
    trig = next((r["triggered_at"] for r in rows if r.get("triggered_at") is not None), None)
    if trig is not None:
        ax.axvline(trig, color="grey", ls=":", lw=1, label=f"triggered at step {trig}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("curriculum step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Curriculum schedule")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def timing_chart(timings: Mapping[str, Mapping[str, Any]]) -> Figure | None:
    items = [(name, float(t.get("wall_s", 0.0))) for name, t in sorted(timings.items())]
    if not items:
        return None
    fig = Figure(figsize=(6.5, 0.45 * len(items) + 1.2))
    ax = fig.subplots()
    ax.barh([n for n, _ in items][::-1], [w / 60 for _, w in items][::-1], color="#4c72b0")
    for y, (_, w) in enumerate(items[::-1]):
        ax.annotate(_duration(w), (w / 60, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("minutes")
    ax.set_title(f"Wall-clock per notebook (total {_duration(sum(w for _, w in items))})")
    fig.tight_layout()
    return fig


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m {s:02d}s" if m else f"{s}s"
