"""The report's KernelBench part: the held-out problems' table (the headline), per category, the
split, and a few of the model's answers.

Every number comes from the evaluation records' rows of the `kernelbench` held-out set (problems RL
never trained on, at their published sizes, eval/heldout.py) and from the run's split file
(tasks/kernelbench.py). A rate carries its 95% interval from resampling problems. fast_1 against
eager is the verifier's own timing of the reference in the same process; fast_1 against
torch.compile needs this machine's stored baselines (`tritonrl baselines`, or eval.baselines_measure),
counts the problems that have one and those no stage solved (none of their samples can be fast), leaves
out for every stage a problem some stage solved without one, and says n/a without any.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..core.paths import RunPaths
from ..eval import metrics as M
from ..tasks.kernelbench import KernelBenchSplit
from .text import Example, _rank

SET = "kernelbench"


def kernelbench_rows(rec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in rec.get("detailed_results", []) if r.get("heldout_set") == SET]


def load_split(paths: RunPaths) -> KernelBenchSplit | None:
    try:
        return KernelBenchSplit.load(paths.kernelbench_split) if paths.kernelbench_split.is_file() else None
    except (OSError, ValueError, TypeError):
        return None


def _rate(rows: Sequence[Mapping[str, Any]], hit) -> float | None:
    return round(100.0 * sum(bool(hit(r)) for r in rows) / len(rows), 1) if rows else None


def _with_ci(rows: Sequence[Mapping[str, Any]], key: str, resamples: int, hit) -> str:
    """"12.5 [6.2, 20.0]": the pooled rate and its problem-bootstrap interval; n/a on no rows."""
    if not rows:
        return "n/a"
    ci = M.bootstrap_interval(rows, key, resamples) if resamples else None
    return f"{_rate(rows, hit):.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def _fast1(rows: Sequence[Mapping[str, Any]], resamples: int, block: str | None = None, measured: bool = True,
           unknown: set[str] | None = None) -> str:
    """fast_1 as eval/metrics counts it: against the verifier's eager timing (block None), or against a
    stored baseline (`block`, e.g. "vs_compile") over `metrics.baseline_rows`: the problems with that
    baseline and those never solved, less `unknown` (problems some stage solved without one: left out
    for every stage alike, not counted slow). 0 when nothing is correct; n/a where nothing could be
    compared (correct samples untimed; no baseline stored for the record, `measured` False)."""
    if block is not None:  # not measured: no rows, n/a
        speed = M.BASELINE_BLOCKS[block]
        rows = [{**r, "speedup": r.get(speed)} for r in M.baseline_rows(rows, block, measured=measured,
                                                                           unknown=unknown)]
    if any(r["correct"] for r in rows) and not any(r["correct"] and r.get("speedup") is not None for r in rows):
        return "n/a"
    return _with_ci(rows, "fast1_rate", resamples, lambda r: M.is_fast(r, 1.0))


def headline_table(records: Mapping[str, Mapping[str, Any]], resamples: int = 2000) -> list[dict[str, Any]]:
    """Per model stage and level: problems, samples, correct %, fast_1 against eager and against
    torch.compile, each with its 95% interval; problems solved at least once."""
    out = []
    rows_of = {stage: kernelbench_rows(rec) for stage, rec in records.items()}
    # problems some stage solved without a torch.compile time: left out of that column for every stage
    unknown = set().union(*(M.unknown_speed(rows, "vs_compile") for rows in rows_of.values()))
    for stage, rows in rows_of.items():
        measured = M.has_baseline(rows, "vs_compile")
        for level in sorted({int(r["level"]) for r in rows}):
            part = [r for r in rows if int(r["level"]) == level]
            solved = {r["id"] for r in part if r["correct"]}
            out.append({"stage": stage, "level": f"L{level}", "problems": len({r["id"] for r in part}),
                        "samples": len(part),
                        "correct % [95% CI]": _with_ci(part, "correct_rate", resamples, lambda r: r["correct"]),
                        "fast_1 vs eager % [95% CI]": _fast1(part, resamples),
                        "fast_1 vs torch.compile % [95% CI]": _fast1(part, resamples, "vs_compile", measured,
                                                                     unknown),
                        "valid %": _rate(part, M.is_valid), "problems solved": len(solved)})
    return out


def category_table(records: Mapping[str, Mapping[str, Any]], split: KernelBenchSplit | None) -> list[dict[str, Any]]:
    """Which kinds of KernelBench problem each model stage solves: per (level, category), the
    held-out problems, the share of samples correct and the problems solved at least once."""
    if split is None:
        return []
    out = []
    for stage, rec in records.items():
        rows = kernelbench_rows(rec)
        groups: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault((int(r["level"]), split.categories.get(r["id"], "?")), []).append(r)
        for (level, cat), part in sorted(groups.items()):
            out.append({"stage": stage, "level": f"L{level}", "category": cat,
                        "problems": len({r["id"] for r in part}), "samples": len(part),
                        "correct %": _rate(part, lambda r: r["correct"]), "valid %": _rate(part, M.is_valid),
                        "solved": ", ".join(sorted({r.get("name") or r["id"] for r in part if r["correct"]})) or "-"})
    return out


def split_table(split: KernelBenchSplit | None) -> list[dict[str, Any]]:
    """The split as the report shows it: per stratum, how many problems RL may train on and how
    many only evaluation sees."""
    if split is None:
        return []
    rows = [{"stratum": k, "train (RL)": v["train"], "held out (evaluation)": v["heldout"]}
            for k, v in sorted(split.strata.items())]
    rows.append({"stratum": "all", "train (RL)": len(split.train_ids), "held out (evaluation)": len(split.heldout_ids)})
    return rows


def answers(records: Mapping[str, Mapping[str, Any]], per_stage: int = 2) -> list[Example]:
    """A few of the model's answers on held-out KernelBench problems: per stage, its correct ones
    first (at most `per_stage`), else the ones that got furthest through the verifier."""
    out: list[Example] = []
    for stage, rec in records.items():
        rows = [r for r in kernelbench_rows(rec) if r.get("completion") is not None]
        seen: set[str] = set()
        for r in sorted(rows, key=_rank, reverse=True):
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            out.append(Example(stage, "KernelBench", r))
            if len(seen) == per_stage:
                break
    return out


def headline_lines(records: Mapping[str, Mapping[str, Any]], split: KernelBenchSplit | None) -> list[str]:
    """The report's first sentences when KernelBench was evaluated: each stage's correct rate per level."""
    lines = []
    for stage, rec in records.items():
        rows = kernelbench_rows(rec)
        if not rows:
            continue
        per = []
        for level in sorted({int(r["level"]) for r in rows}):
            part = [r for r in rows if int(r["level"]) == level]
            per.append(f"Level {level} {_rate(part, lambda r: r['correct']):.1f}% "
                       f"({len({r['id'] for r in part})} problems)")
        lines.append(f"{stage} on held-out KernelBench problems (published sizes): correct " + ", ".join(per) + ".")
    if lines and split is not None:  # what is counted: the split's held-out part, and how much of it was evaluated
        held, evaluated = len(split.heldout_ids), len({r["id"] for rec in records.values() for r in kernelbench_rows(rec)})
        lines.insert(0, f"KernelBench: {held} problems held out of {held + len(split.train_ids)} (split by level and "
                        f"category, seed {split.seed}; RL trained on the other {len(split.train_ids)}); "
                        + ("all of them evaluated." if evaluated == held else
                           f"{evaluated} of them evaluated (eval.kernelbench_num_tasks caps it)."))
    return lines
