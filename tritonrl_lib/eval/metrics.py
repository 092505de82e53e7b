"""The evaluation metrics, as pure functions of per-sample results (no model, no verifier, no I/O).

A *sample* is one verified completion: a row of `detailed_results` in an eval record
(`sample_row`). Rates are percentages of samples, as in the source's eval JSON:

    valid_rate     passed the static (AST) check
    compiled_rate  passed compile
    correct_rate   correct: every input variation matched, no cheat flag
    fast1_rate     correct and speedup > 1 (timed against the PyTorch reference)
    fast2_rate     correct and speedup > 2
    geomean_speedup  geometric mean speedup of the correct samples that were timed
    fast_p         KernelBench's fast_p at p = 0, 1.0, 1.5, 2.0: percent of samples correct AND
                   speedup > p ({"0": .., "1.0": .., "1.5": .., "2.0": ..}); fast_p["0"] is the
                   correct rate, fast_p["1.0"] == fast1_rate, fast_p["2.0"] == fast2_rate
    vs_eager_baseline, vs_compile  the same fast_p and geometric mean against this machine's measured
                   reference times (baselines.py: eager PyTorch, and `torch.compile`) instead of the
                   verifier's own paired eager timing; over the samples whose task has that baseline
                   and those of tasks with no correct sample (never fast, whatever the baseline: so
                   measuring the solved tasks alone gives fast_p over all samples, `baseline_rows`);
                   None where no baseline was attached
    pass_at_1, pass_at_k  the unbiased pass@k estimator (Chen et al. 2021) per task, averaged
                          over tasks, in percent
    num_loop, loop_rate  samples whose generation was stopped in a loop (a row's `finish_reason` is
                   "loop": the rollout's stop rule, rollout/stopping.py's LoopStop), and their share
                   in percent; None when no row records a finish_reason (completions given as text).
                   Rows written before the rule existed never say "loop": their loop_rate is 0

A row's `finish_reason` (fence | eos | length | loop; absent where the completion came as plain text)
is why its generation stopped. `failure_reasons` counts a looped sample that failed under `loop`,
whatever the verifier said of the code the loop cut off.

Intervals (`intervals`, `paired_difference`): 95% percentile intervals from resampling tasks,
in percent (below, after the aggregates).

Speed is only known where the timing stage ran (a GPU). Where no correct sample was timed, the
fast rates and the geometric mean are None ("not measured"), never 0; with no correct sample at
all the fast rates are 0, since nothing can be fast without being correct.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from ..verify import reasons
from ..verify.verdict import Verdict, clip_error, passed

FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
# the speedup a row carries against each reference: the verifier's paired eager timing, and this
# machine's stored baselines (attached by baselines.attach_speedups)
BASELINE_BLOCKS = {"vs_eager_baseline": "speedup_vs_eager_baseline", "vs_compile": "speedup_vs_compile"}
BASELINE_MS = {"vs_eager_baseline": "baseline_eager_ms", "vs_compile": "baseline_compile_ms"}
LOOP = "loop"  # the finish_reason of a completion stopped in a loop (rollout.FINISH_REASONS)
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


ERROR_CHARS = 500  # of a verdict's error text kept in an evaluation's record


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
        "error": clip_error(verdict.error or "", ERROR_CHARS),
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


def is_loop(row: Mapping[str, Any]) -> bool:
    """Was the sample's generation stopped in a loop? (False for rows without a finish_reason.)"""
    return row.get("finish_reason") == LOOP


def is_fast(row: Mapping[str, Any], threshold: float, speedup_key: str = "speedup") -> bool:
    s = row.get(speedup_key)
    return bool(row["correct"]) and s is not None and s > threshold


def fast_p_key(threshold: float) -> str:
    """The key of a threshold in a `fast_p` block: "0", "1.0", "1.5", "2.0"."""
    return "0" if threshold == 0 else f"{float(threshold):.1f}"


# --------------------------------------------------------------------------- aggregates


def _pct(num: int, den: int) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarize(rows: Sequence[Mapping[str, Any]], k: int,
              measured: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The metrics of one group of samples (all of a stage, or one level of it). `measured`: per baseline
    block, whether the whole record has that baseline (a group of it with nothing solved then reads 0,
    not "not measured"); default: whether these rows have it."""
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
    out["fast_p"] = fast_p(rows)
    for block in BASELINE_BLOCKS:
        out[block] = baseline_block(rows, block, measured=None if measured is None else measured[block])
    out["pass_at_1"] = _mean_pass_at(rows, 1)
    out["pass_at_k"] = _mean_pass_at(rows, k)
    out["k"] = k
    recorded = any("finish_reason" in r for r in rows)
    out["num_loop"] = sum(is_loop(r) for r in rows) if recorded else None
    out["loop_rate"] = _pct(out["num_loop"], n) if recorded else None
    return out


def fast_p(rows: Sequence[Mapping[str, Any]], speedup_key: str = "speedup",
           thresholds: Sequence[float] = FAST_P_THRESHOLDS) -> dict[str, float | None]:
    """Percent of `rows` correct and faster than p (`speedup_key` > p), per threshold p. p = 0 is the
    correct rate (no timing needed); above 0, None when correct samples exist but none was timed (as
    fast1_rate); None for every p when there are no rows."""
    n = len(rows)
    correct = [r for r in rows if r["correct"]]
    timed = any(r.get(speedup_key) is not None for r in correct)
    out: dict[str, float | None] = {}
    for p in thresholds:
        if p == 0:
            out[fast_p_key(p)] = _pct(len(correct), n)
        elif correct and not timed:
            out[fast_p_key(p)] = None
        else:
            out[fast_p_key(p)] = _pct(sum(is_fast(r, p, speedup_key) for r in rows), n)
    return out


def has_baseline(rows: Iterable[Mapping[str, Any]], block: str) -> bool:
    """Whether any of these rows' tasks has that stored baseline (was it measured at all)."""
    return any(r.get(BASELINE_MS[block]) is not None for r in rows)


def unknown_speed(rows: Iterable[Mapping[str, Any]], block: str) -> set[str]:
    """The tasks with a correct sample and no stored baseline: their speed against it is unknown."""
    return {r["id"] for r in rows if r["correct"] and r.get(BASELINE_MS[block]) is None}


def baseline_rows(rows: Sequence[Mapping[str, Any]], block: str, *, measured: bool | None = None,
                  unknown: Iterable[str] | None = None) -> list[Mapping[str, Any]]:
    """The rows fast_p against a stored baseline (`block`) is counted over: those whose task has the
    baseline, and every row of a task none of whose rows is correct (no baseline can make a wrong
    sample fast). Left out: the `unknown` tasks (default `unknown_speed(rows)`; a table of several
    stages passes their union, so every stage counts the same tasks). Empty when the baseline was not
    measured at all (`measured`; default: whether these rows have it)."""
    if not (has_baseline(rows, block) if measured is None else measured):
        return []
    left_out = unknown_speed(rows, block) if unknown is None else set(unknown)
    return [r for r in rows if r["id"] not in left_out]


def baseline_block(rows: Sequence[Mapping[str, Any]], block: str,
                   measured: bool | None = None) -> dict[str, Any] | None:
    """fast_p and the geometric-mean speedup against one stored baseline (`block`: vs_eager_baseline or
    vs_compile), over `baseline_rows`; None when that baseline was not measured (never zeros).
    `num_tasks_without`: the tasks left out (a correct sample, no baseline)."""
    covered = baseline_rows(rows, block, measured=measured)
    if not covered:
        return None
    key = BASELINE_BLOCKS[block]
    correct = [r for r in covered if r["correct"]]
    timed = [r for r in correct if r.get(key) is not None]
    gm = geomean(r[key] for r in timed)
    return {"num_samples": len(covered), "num_tasks": len({r["id"] for r in covered}),
            "num_tasks_without": len({r["id"] for r in rows} - {r["id"] for r in covered}),
            "num_correct": len(correct), "num_timed": len(timed),
            "fast_p": fast_p(covered, key), "geomean_speedup": round(gm, 4) if gm is not None else None}


def fast_p_table(records: Mapping[str, Mapping[str, Any]], levels: bool = True) -> list[dict[str, Any]]:
    """Per model stage and level, one row per reference a speedup was measured against: the
    verifier's own eager timing ("eager (verifier)"), and where attached, this machine's eager and
    torch.compile baselines. fast_p in percent, geomean over the correct timed samples."""
    against = (("eager (verifier)", None), ("eager baseline", "vs_eager_baseline"), ("torch.compile", "vs_compile"))
    rows = []
    for model_stage, rec in records.items():
        m = rec["metrics"]
        groups = [("all", m)] + ([(f"L{lvl}", mm) for lvl, mm in m.get("by_level", {}).items()] if levels else [])
        for label, mm in groups:
            for name, block in against:
                b = mm if block is None else mm.get(block)
                if b is None:
                    continue
                fp = b.get("fast_p") or fast_p_from_rates(b)
                rows.append({"stage": model_stage, "level": label, "against": name, "samples": b.get("num_samples"),
                             **{f"fast_{k}": fp.get(k) for k in map(fast_p_key, FAST_P_THRESHOLDS)},
                             "geomean_speedup": b.get("geomean_speedup")})
    return rows


def fast_p_from_rates(m: Mapping[str, Any]) -> dict[str, float | None]:
    """A fast_p block from an older record's rates (before fast_p was recorded): 1.5 unknown."""
    return {"0": m.get("correct_rate"), "1.0": m.get("fast1_rate"), "1.5": None, "2.0": m.get("fast2_rate")}


def _mean_pass_at(rows: Sequence[Mapping[str, Any]], k: int) -> float | None:
    """Mean over tasks of pass@k in percent; tasks with fewer than k samples are left out
    (None when no task has k samples)."""
    per_task: dict[str, list[bool]] = {}
    for r in rows:
        per_task.setdefault(r["id"], []).append(bool(r["correct"]))
    scores = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
    return round(100.0 * sum(scores) / len(scores), 2) if scores else None


def compute_metrics(rows: Sequence[Mapping[str, Any]], k: int, resamples: int = 0) -> dict[str, Any]:
    """Overall metrics at the top level (the source's layout: metrics.valid_rate, ...), the same
    per level under `by_level` ("1", "2", ...). With `resamples`, 95% task-bootstrap intervals of
    the rates under `intervals` (overall and per held-out set); rows that name their held-out set
    (`heldout_set`) also give `by_set`."""
    measured = {block: has_baseline(rows, block) for block in BASELINE_BLOCKS}  # once for the record
    out = summarize(rows, k, measured)
    levels = sorted({int(r["level"]) for r in rows})
    out["by_level"] = {str(lvl): summarize([r for r in rows if int(r["level"]) == lvl], k, measured)
                       for lvl in levels}
    if resamples:
        out["intervals"] = intervals(rows, resamples)
    by_set = set_metrics(rows, k, resamples, measured)
    if by_set:
        out["by_set"] = by_set
    return out


def failure_reasons(rows: Iterable[Mapping[str, Any]], top: int | None = None,
                    detail: bool = False) -> list[tuple[str, int]]:
    """Most common reasons among the samples that were not correct. `detail=False` groups by the
    reason's head (`mismatch:scaled` and `mismatch:seed` both count as `mismatch`). A sample whose
    generation was stopped in a loop counts as `loop`, not as what the verifier made of the cut code."""
    counts: Counter[str] = Counter()
    for r in rows:
        if r["correct"]:
            continue
        if is_loop(r):
            counts[LOOP] += 1
            continue
        reason = r.get("reason") or "unknown"
        counts[reason if detail else reasons.head(reason)] += 1
    return counts.most_common(top)


def funnel(metrics: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """(step, percent) along valid -> compiled -> correct -> fast_1 -> fast_2."""
    return [(name, metrics.get(key)) for name, key in FUNNEL]


# --------------------------------------------------------------------------- intervals
#
# Samples of one task are not independent (the same prompt, one model), so an interval that
# treats every sample as a draw would be too narrow. The bootstrap here resamples *tasks* with
# replacement, each bringing all its samples along, and recomputes the pooled rate (hits over
# samples): the spread is the spread over which tasks happened to be in the set. A difference of
# two stages (RL minus SFT) is paired: both stages' samples of the same resampled tasks.

INTERVAL_KEYS = ("valid_rate", "compiled_rate", "correct_rate", "fast1_rate")
_HIT = {"valid_rate": is_valid, "compiled_rate": is_compiled, "correct_rate": lambda r: bool(r["correct"]),
        "fast1_rate": lambda r: is_fast(r, 1.0)}


def per_task_hits(rows: Sequence[Mapping[str, Any]], key: str = "correct_rate") -> dict[str, tuple[int, int]]:
    """task id -> (samples counted by `key`, samples) for one group of rows."""
    hit = _HIT[key]
    out: dict[str, list[int]] = {}
    for r in rows:
        c = out.setdefault(r["id"], [0, 0])
        c[0] += bool(hit(r))
        c[1] += 1
    return {t: (h, n) for t, (h, n) in out.items()}


def _quantiles(values: list[float], level: float) -> list[float]:
    values = sorted(values)
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2

    def q(p: float) -> float:  # linear interpolation between order statistics
        x = p * (len(values) - 1)
        i = int(x)
        j = min(i + 1, len(values) - 1)
        return values[i] + (values[j] - values[i]) * (x - i)

    return [round(q(lo_q), 2), round(q(hi_q), 2)]


def bootstrap_interval(rows: Sequence[Mapping[str, Any]], key: str = "correct_rate", resamples: int = 2000,
                       seed: int = 0, level: float = 0.95) -> list[float] | None:
    """The `level` percentile interval (percent) of the pooled rate `key`, resampling tasks."""
    counts = list(per_task_hits(rows, key).values())
    if not counts or resamples < 1:
        return None
    rng = random.Random(f"bootstrap:{seed}:{key}")
    t = len(counts)
    rates = []
    for _ in range(resamples):
        pick = [counts[rng.randrange(t)] for _ in range(t)]
        rates.append(100.0 * sum(h for h, _ in pick) / sum(n for _, n in pick))
    return _quantiles(rates, level)


def intervals(rows: Sequence[Mapping[str, Any]], resamples: int = 2000, seed: int = 0,
              level: float = 0.95) -> dict[str, list[float] | None]:
    """95% task-bootstrap intervals of the funnel's rates (fast1 only where speed was measured)."""
    timed = any(r["correct"] and r.get("speedup") is not None for r in rows)
    out: dict[str, list[float] | None] = {}
    for key in INTERVAL_KEYS:
        if key == "fast1_rate" and not timed:
            out[key] = None
            continue
        out[key] = bootstrap_interval(rows, key, resamples, seed, level)
    return out


def paired_difference(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]],
                      key: str = "correct_rate", resamples: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict[str, Any] | None:
    """Stage a minus stage b on the tasks both evaluated: the difference of pooled rates in
    percentage points, and its `level` interval from resampling those tasks (both stages' samples
    of a drawn task come along together). None when they share no task."""
    a, b = per_task_hits(rows_a, key), per_task_hits(rows_b, key)
    common = sorted(set(a) & set(b))
    if not common:
        return None

    def rate(counts: dict[str, tuple[int, int]], ids: Sequence[str]) -> float:
        return 100.0 * sum(counts[i][0] for i in ids) / sum(counts[i][1] for i in ids)

    diff = rate(a, common) - rate(b, common)
    out: dict[str, Any] = {"key": key, "difference": round(diff, 2), "a": round(rate(a, common), 2),
                           "b": round(rate(b, common), 2), "tasks": len(common),
                           "samples_a": sum(a[i][1] for i in common), "samples_b": sum(b[i][1] for i in common),
                           "interval": None, "above_zero": None, "resamples": resamples, "level": level}
    if resamples >= 1:
        rng = random.Random(f"paired:{seed}:{key}")
        diffs = []
        for _ in range(resamples):
            ids = [common[rng.randrange(len(common))] for _ in common]
            diffs.append(rate(a, ids) - rate(b, ids))
        out["interval"] = _quantiles(diffs, level)
        out["above_zero"] = out["interval"][0] > 0
    return out


def set_metrics(rows: Sequence[Mapping[str, Any]], k: int, resamples: int = 0,
                measured: Mapping[str, bool] | None = None) -> dict[str, dict[str, Any]]:
    """Per held-out set (rows' `heldout_set`: "tasks" = (a), "families" = (b)), the summary and,
    with `resamples`, its intervals. Empty when no row names a set."""
    sets = sorted({r["heldout_set"] for r in rows if r.get("heldout_set")})
    out = {}
    for name in sets:
        part = [r for r in rows if r.get("heldout_set") == name]
        out[name] = summarize(part, k, measured)
        if resamples:
            out[name]["intervals"] = intervals(part, resamples)
    return out
