"""The RL figure of notebook 03: reward and correct rate per round (or step), and the curriculum's
P(Level 2), drawn from logs/rl_log.jsonl and logs/curriculum.jsonl to charts/rl_curves.png."""

from __future__ import annotations

from ..config import RunPaths
from ..curriculum import read_curriculum_log
from .rl_log import read_rl_log


def plot_rl_curves(paths: RunPaths, save: bool = True):
    """Reward / correct-rate per round (or step) and the curriculum's P(Level 2), from the logs.
    Returns the matplotlib figure (None when there is nothing logged yet)."""
    log = read_rl_log(paths)
    cur = read_curriculum_log(paths.curriculum_log)
    if not log and not cur:
        return None
    import matplotlib

    if save:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    if log:
        key = "round" if "round" in log[0] else "step"
        xs = [r[key] for r in log]
        ax1.plot(xs, [r.get("mean_reward") for r in log], marker="o", label="mean reward")
        ax1.plot(xs, [r.get("correct_rate") for r in log], marker="s", label="correct rate")
        for lvl, style in (("1", ":"), ("2", "--")):
            ys = [(r.get("by_level") or {}).get(lvl, {}).get("correct_rate") for r in log]
            if any(y is not None for y in ys):
                ax1.plot(xs, ys, linestyle=style, label=f"correct rate L{lvl}")
        ax1.set_xlabel(key)
        ax1.set_ylim(-0.02, 1.02)
        ax1.set_title(f"RL ({log[0].get('method', '')}) on training tasks")
        ax1.legend(fontsize=8)
    if cur:
        xs = [r["step"] for r in cur]
        ax2.step(xs, [r["p_level2"] for r in cur], where="post", label="P(Level 2)")
        ax2.plot(xs, [r["running_l1_rate"] for r in cur], marker=".", label="running L1 correct rate")
        trig = next((r["triggered_at"] for r in cur if r.get("triggered_at") is not None), None)
        if trig is not None:
            ax2.axvline(trig, color="grey", linestyle=":", label=f"trigger (step {trig})")
        ax2.set_xlabel("curriculum step")
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_title("curriculum")
        ax2.legend(fontsize=8)
    fig.tight_layout()
    if save:
        paths.charts_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(paths.chart("rl_curves"), dpi=110)
    return fig
