"""The RL figure of notebook 03, drawn from logs/rl_log.jsonl and logs/curriculum.jsonl to
charts/rl_curves.png: reward and correct rate per round (or step) with the correct rate's trend,
the curriculum's P(Level 2), where each step's time went (generate / verification not hidden
behind generation / train), and how many groups carried a learning signal."""

from __future__ import annotations

from typing import Any, Sequence

from ..config import RunPaths
from ..curriculum import read_curriculum_log
from .rl_log import read_rl_log


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


def _time_split(log: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per step: the policy writing, verification it waited for, the update (seconds)."""
    parts: dict[str, list[float]] = {"generate": [], "verify (waited)": [], "train": []}
    for r in log:
        t = r.get("timing") or {}
        parts["generate"].append(float(t.get("generate_s", 0.0)) + float(t.get("refine_generate_s", 0.0)))
        parts["verify (waited)"].append(float(t.get("verify_wait_s", 0.0)))
        parts["train"].append(float(t.get("train_s", 0.0)))
    return parts


def plot_rl_curves(paths: RunPaths, save: bool = True):
    """The figure (module doc) from the run's logs; saved to charts/rl_curves.png when `save`.
    Returns the matplotlib figure (None when there is nothing logged yet)."""
    log = read_rl_log(paths)
    cur = read_curriculum_log(paths.curriculum_log)
    if not log and not cur:
        return None
    import matplotlib

    if save:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    timed = any(r.get("timing") for r in log)
    rows = 2 if timed else 1
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.8 * rows), squeeze=False)
    ax1, ax2 = axes[0]
    key = ("round" if "round" in log[0] else "step") if log else "step"
    if log:
        xs = [r[key] for r in log]
        ax1.plot(xs, [r.get("mean_reward") for r in log], marker="o", label="mean reward")
        rates = [r.get("correct_rate") for r in log]
        ax1.plot(xs, rates, marker="s", label="correct rate")
        fit = linear_trend(xs, rates)
        if fit is not None:
            slope, icept = fit
            ax1.plot([xs[0], xs[-1]], [icept + slope * xs[0], icept + slope * xs[-1]], color="tab:orange",
                     linestyle="-.", label=f"correct-rate trend ({slope:+.3f} per {key})")
        for lvl, style in (("1", ":"), ("2", "--")):
            ys = [(r.get("by_level") or {}).get(lvl, {}).get("correct_rate") for r in log]
            if any(y is not None for y in ys):
                ax1.plot(xs, ys, linestyle=style, label=f"correct rate L{lvl}")
        ax1.set_xlabel(key)
        ax1.set_ylim(-0.02, 1.02)
        ax1.set_title(f"RL ({log[0].get('method', '')}) on training tasks")
        ax1.legend(fontsize=8)
    if cur:
        cx = [r["step"] for r in cur]
        ax2.step(cx, [r["p_level2"] for r in cur], where="post", label="P(Level 2)")
        ax2.plot(cx, [r["running_l1_rate"] for r in cur], marker=".", label="running L1 correct rate")
        trig = next((r["triggered_at"] for r in cur if r.get("triggered_at") is not None), None)
        if trig is not None:
            ax2.axvline(trig, color="grey", linestyle=":", label=f"trigger (step {trig})")
        ax2.set_xlabel("curriculum step")
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_title("curriculum")
        ax2.legend(fontsize=8)
    if timed:
        ax3, ax4 = axes[1]
        xs = [r[key] for r in log]
        bottom = [0.0] * len(xs)
        for name, values in _time_split(log).items():
            ax3.bar(xs, values, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, values)]
        busy = [float((r.get("timing") or {}).get("verify_s", 0.0)) for r in log]
        ax3.plot(xs, busy, color="black", marker="x", linestyle="", label="verifier busy (overlapped)")
        ax3.set_xlabel(key)
        ax3.set_ylabel("seconds")
        ax3.set_title("where each step's time went")
        ax3.legend(fontsize=8)
        groups = [(r.get("signal") or {}).get("groups", 0) for r in log]
        signal = [(r.get("signal") or {}).get("with_signal", 0) for r in log]
        first = [(r.get("signal") or {}).get("first_draw_with_signal", 0) for r in log]
        ax4.bar(xs, groups, color="lightgrey", label="groups")
        ax4.bar(xs, signal, color="tab:green", label="with signal (after redraws)")
        ax4.plot(xs, first, color="black", marker="o", linestyle="", label="with signal (first draw)")
        ax4.set_xlabel(key)
        ax4.set_title(f"groups carrying a learning signal ({(log[0].get('signal') or {}).get('rule', '')})")
        ax4.legend(fontsize=8)
    fig.tight_layout()
    if save:
        paths.charts_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(paths.chart("rl_curves"), dpi=110)
    return fig
