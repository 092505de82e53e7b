"""A real GPU run's figures, kept in the repository as small JSON (no weights), that a demonstration's
report shows beside its own: a cpu run shows what the method does at a size where its numbers mean
nothing, and this shows what it did where they do, labelled as another run's.

`docs/benchmarks/reference_gpu_run.json` is written by `benchmarks/gpu_rl_session.py --reference`
from a session's summary: when and where it was measured, the command, and its tables (the SFT
variants on the development set, held-out KernelBench per level and category, the built-in held-out
sets, RL minus SFT, RL per round), and, where the run stopped short, `partial`: what is missing and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.jsonio import DamagedFile, read_json
from ..core.paths import project_root

REFERENCE_FILE = Path("docs") / "benchmarks" / "reference_gpu_run.json"
REQUIRED = ("measured", "machine", "command", "tables")


def load_reference(root: Path | None = None) -> dict[str, Any] | None:
    """The kept run's figures, or None when the file is absent or not of this shape."""
    path = (root or project_root()) / REFERENCE_FILE
    try:
        data = read_json(path, None)
    except (OSError, DamagedFile):
        return None
    if not isinstance(data, dict) or any(k not in data for k in REQUIRED) or not isinstance(data["tables"], dict):
        return None
    return data


def reference_from_summary(summary: dict[str, Any], *, measured: str, machine: str, command: str) -> dict[str, Any]:
    """The file's content from a GPU session's summary.json (benchmarks/gpu_rl_session.py)."""
    kb = summary.get("kernelbench") or {}
    builtin, diffs = [], []
    for stage, ev in (summary.get("eval") or {}).items():
        m = ev.get("metrics") or {}
        for name, mm in sorted((m.get("by_set") or {}).items()):
            if name == "kernelbench":
                continue
            iv = (mm.get("intervals") or {}).get("correct_rate")
            builtin.append({"stage": stage, "set": name, "tasks": mm.get("num_tasks"), "samples": mm.get("num_samples"),
                            "correct %": mm.get("correct_rate"), "95% CI": iv, "valid %": mm.get("valid_rate")})
        for name, per in [("all", (ev.get("vs_sft") or {}).get("all"))] + sorted(
                ((ev.get("vs_sft") or {}).get("by_set") or {}).items()):
            c = (per or {}).get("correct_rate") or {}
            if c:
                diffs.append({"stage": stage, "set": name, "correct minus SFT (points)": c.get("difference"),
                              "95% CI": c.get("interval"), "above zero": c.get("above_zero")})
        for r in ev.get("vs_sft_judged") or []:  # a cut pass: only the problems judged in both
            diffs.append({"stage": stage, "set": f"kernelbench L{r['level']}: {r['judged in both']} of "
                          f"{r['problems']} problems judged in both", "correct minus SFT (points)": r["difference"],
                          "95% CI": r["interval"], "above zero": r["above_zero"]})
    rounds = []
    for method, rl in (summary.get("rl") or {}).items():
        for r in rl.get("rows") or []:
            rounds.append({"method": method, "step": r.get("step"), "correct on training tasks": r.get("correct_rate"),
                           "groups with signal": r.get("signal"), "seconds": r.get("step_s")})
    partial = {"partial": summary["partial"]} if summary.get("partial") else {}
    return {"measured": measured, "machine": machine, "command": command, "profile": summary.get("profile"), **partial,
            "overrides": summary.get("overrides"),
            "tables": {"dev_set": summary.get("dev_set", []), "kernelbench": kb.get("headline", []), "kernelbench_categories": kb.get("categories", []),
                       "builtin": builtin, "vs_sft": diffs, "rl_rounds": rounds}}
