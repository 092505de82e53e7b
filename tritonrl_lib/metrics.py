"""The evaluation metrics, as pure functions of per-sample results (no model, no verifier, no I/O).

A *sample* is one verified completion: a row of `detailed_results` in an eval record
(`sample_row`). Rates are percentages of samples, as in the source's eval JSON:

    valid_rate     passed the static (AST) check
    compiled_rate  passed compile
    correct_rate   correct: every input variation matched, no cheat flag
    fast1_rate     correct and speedup > 1 (timed against the PyTorch reference)
    fast2_rate     correct and speedup > 2
    geomean_speedup  geometric mean speedup of the correct samples that were timed
    pass_at_1, pass_at_k  the unbiased pass@k estimator (Chen et al. 2021) per task, averaged
                          over tasks, in percent

Speed is only known where the timing stage ran (a GPU). Where no correct sample was timed, the
fast rates and the geometric mean are None ("not measured"), never 0; with no correct sample at
all the fast rates are 0, since nothing can be fast without being correct.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from .verify import reasons
from .verify.verdict import Verdict, passed

RATE_KEYS = ("valid_rate", "compiled_rate", "correct_rate", "fast1_rate", "fast2_rate")
FUNNEL = (("valid", "valid_rate"), ("compiled", "compiled_rate"), ("correct", "correct_rate"),
          ("fast_1", "fast1_rate"), ("fast_2", "fast2_rate"))


# --------------------------------------------------------------------------- pass@k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n, of which c are
    correct, is correct: 1 - C(n-c, k) / C(n, k), as a running product (no huge binomials)."""
    if n < 1 or k < 1:
        raise ValueError(f"pass@k needs n >= 1 and k >= 1, got n={n}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count {c} outside 0..{n}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


# --------------------------------------------------------------------------- rows


def sample_row(verdict: Verdict, *, task_id: str, level: int, sample: int, model_stage: str,
               name: str = "", completion: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One `detailed_results` row: the task and sample, and what the verifier said.

    As in the source's records, `stage` is the last verifier stage passed ("timing", "compile",
    ...); the model stage that wrote the sample (base / sft / rl) is `model_stage`."""
    row: dict[str, Any] = {
        "id": task_id,
        "name": name,
        "level": int(level),
        "sample": int(sample),
        "model_stage": model_stage,
        "stage": verdict.stage,
        "reward": float(verdict.reward),
        "reason": verdict.reason,
        "correct": bool(verdict.correct),
        "speedup": _finite_or_none(verdict.speedup),
        "ref_time_ms": _finite_or_none(verdict.ref_time_ms),
        "kernel_time_ms": _finite_or_none(verdict.kernel_time_ms),
        "cheat_flags": list(verdict.cheat_flags),
        "error": (verdict.error or "")[:500],
        "notes": list(verdict.notes),
    }
    if extra:
        row.update(extra)
    if completion is not None:
        row["completion"] = completion
    return row


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def is_valid(row: Mapping[str, Any]) -> bool:
    return passed(row["stage"], "static")


def is_compiled(row: Mapping[str, Any]) -> bool:
    return passed(row["stage"], "compile")


def is_fast(row: Mapping[str, Any], threshold: float) -> bool:
    s = row.get("speedup")
    return bool(row["correct"]) and s is not None and s > threshold


# --------------------------------------------------------------------------- aggregates


def _pct(num: int, den: int) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarize(rows: Sequence[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """The metrics of one group of samples (all of a stage, or one level of it)."""
    n = len(rows)
    correct = [r for r in rows if r["correct"]]
    timed = [r for r in correct if r.get("speedup") is not None]
    out: dict[str, Any] = {
        "num_samples": n,
        "num_tasks": len({r["id"] for r in rows}),
        "num_valid": sum(is_valid(r) for r in rows),
        "num_compiled": sum(is_compiled(r) for r in rows),
        "num_correct": len(correct),
        "num_timed": len(timed),
    }
    out["valid_rate"] = _pct(out["num_valid"], n)
    out["compiled_rate"] = _pct(out["num_compiled"], n)
    out["correct_rate"] = _pct(len(correct), n)
    if correct and not timed:
        out["fast1_rate"] = out["fast2_rate"] = None  # correct, but speed not measured (no GPU)
    else:
        out["fast1_rate"] = _pct(sum(is_fast(r, 1.0) for r in rows), n)
        out["fast2_rate"] = _pct(sum(is_fast(r, 2.0) for r in rows), n)
    gm = geomean(r["speedup"] for r in timed)
    out["geomean_speedup"] = round(gm, 4) if gm is not None else None
    out["pass_at_1"] = _mean_pass_at(rows, 1)
    out["pass_at_k"] = _mean_pass_at(rows, k)
    out["k"] = k
    return out


def _mean_pass_at(rows: Sequence[Mapping[str, Any]], k: int) -> float | None:
    """Mean over tasks of pass@k in percent; tasks with fewer than k samples are left out
    (None when no task has k samples)."""
    per_task: dict[str, list[bool]] = {}
    for r in rows:
        per_task.setdefault(r["id"], []).append(bool(r["correct"]))
    scores = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
    return round(100.0 * sum(scores) / len(scores), 2) if scores else None


def compute_metrics(rows: Sequence[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """Overall metrics at the top level (the source's layout: metrics.valid_rate, ...), the same
    per level under `by_level` ("1", "2", ...)."""
    out = summarize(rows, k)
    levels = sorted({int(r["level"]) for r in rows})
    out["by_level"] = {str(lvl): summarize([r for r in rows if int(r["level"]) == lvl], k) for lvl in levels}
    return out


def failure_reasons(rows: Iterable[Mapping[str, Any]], top: int | None = None,
                    detail: bool = False) -> list[tuple[str, int]]:
    """Most common reasons among the samples that were not correct. `detail=False` groups by the
    reason's head (`mismatch:scaled` and `mismatch:seed` both count as `mismatch`)."""
    counts: Counter[str] = Counter()
    for r in rows:
        if r["correct"]:
            continue
        reason = r.get("reason") or "unknown"
        counts[reason if detail else reasons.head(reason)] += 1
    return counts.most_common(top)


def funnel(metrics: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """(step, percent) along valid -> compiled -> correct -> fast_1 -> fast_2."""
    return [(name, metrics.get(key)) for name, key in FUNNEL]
