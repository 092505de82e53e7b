"""The verifier pool's timeline from traced verdicts (benchmarks/verifier.py --trace): one row per
worker, one bar per candidate from the moment the pool sent it to the moment its verdict came back,
split by the points its process reached (TRITONRL_TRACE marks, on the machine's monotonic clock).

    python benchmarks/verifier_timeline.py OUT/verifier_cuda.json --out timeline.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# which span a mark ends, in the order a candidate goes through them
SPANS = [
    ("launched", "hand-over / fork", "#bbbbbb"),
    ("setup", "process set-up", "#8c564b"),
    ("ref", "reference phase", "#1f77b4"),
    ("built", "import + build", "#9467bd"),
    ("tiny", "tiny", "#ff7f0e"),
    ("full", "full (5 input sets)", "#2ca02c"),
    ("timing_lock", "waiting for the GPU alone", "#d62728"),
    ("done", "timing", "#e377c2"),
    ("end", "exit + reap", "#7f7f7f"),
    ("back", "back to the pool", "#17becf"),
]


def span_of(label: str) -> str:
    if label.startswith("ref"):
        return "ref"
    if label in ("cand:tiny", "gate:tiny"):
        return "tiny"
    if label.startswith("cand:") or label == "gate:full":
        return "full"
    if label == "judged":  # on a GPU the full stage's answer is read after timing (it was judged meanwhile)
        return "done"
    return label


def segments(phases: dict) -> list[tuple[float, float, str]]:
    """(start, end, span) pieces of one candidate, absolute monotonic seconds."""
    marks = sorted((t, k[1:]) for k, t in phases.items()
                   if k.startswith("@") and k not in ("@worker", "@job") and not k.startswith("@spare_"))
    if not marks or "@sent" not in phases:
        return []
    out, prev = [], phases["@sent"]
    for t, label in marks:
        if label == "sent":
            continue
        out.append((prev, t, span_of(label)))
        prev = t
    return out


def holds(phases: dict) -> list[tuple[float, float, str]]:
    """The GPU lock holds a traced candidate's process reported: (start, end, "s" shared | "a" alone)."""
    out = []
    for k, t in phases.items():
        if k.startswith("|") and not k.endswith("~") and f"{k}~" in phases:
            out.append((t, phases[f"{k}~"], k[1]))
    return out


def draw_timeline(labels: list[str], fresh: list[dict], warm: list[dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colors = {key: c for key, _, c in SPANS}
    fig, axes = plt.subplots(2, 1, figsize=(16, 7), sharex=False)
    for ax, verdicts, title in ((axes[0], fresh, "fresh pool"), (axes[1], warm, "warm pool (same batch again)")):
        traced = [(lab, v["phases"]) for lab, v in zip(labels, verdicts) if "@sent" in v.get("phases", {})]
        if not traced:
            ax.set_title(f"{title}: no trace (run with --trace)")
            continue
        t0 = min(p["@sent"] for _, p in traced)
        for lab, p in traced:
            row = p.get("@worker", 0)
            for a, b, span in segments(p):
                ax.barh(row, b - a, left=a - t0, height=0.8, color=colors.get(span, "#000000"), edgecolor="white",
                        linewidth=0.3)
            for a, b, mode in holds(p):  # the GPU lock held: a black (shared) or red (alone) line under the bar
                ax.plot([a - t0, b - t0], [row - 0.44, row - 0.44], color="#d62728" if mode == "a" else "black",
                        linewidth=2.5, solid_capstyle="butt")
            ax.text(p["@sent"] - t0 + 0.02, row + 0.42, lab, fontsize=6, va="bottom", rotation=0)
        ax.set_title(f"{title}: {max(p['@back'] for _, p in traced) - t0:.1f} s")
        ax.set_ylabel("worker")
        ax.set_xlabel("seconds since the first candidate was sent")
        ax.invert_yaxis()
    fig.legend(handles=[Patch(color=c, label=name) for _, name, c in SPANS], loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="verifier_<device>.json written by benchmarks/verifier.py --trace")
    ap.add_argument("--out", required=True, help="PNG to write")
    args = ap.parse_args()
    data = json.loads(Path(args.json).read_text())
    rows = data["rows"]
    fresh = [r["ours"] if "ours" in r else r for r in rows]
    warm = [r.get("ours_warm") or r.get("warm") or {} for r in rows]
    draw_timeline([r["candidate"] for r in rows], fresh, warm, Path(args.out))


if __name__ == "__main__":
    main()
