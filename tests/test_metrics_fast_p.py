"""fast_p (KernelBench's fast_0 / 1.0 / 1.5 / 2.0) and the speed blocks against stored baselines, on rows
whose figures are worked out by hand here (no verifier, no GPU)."""

from __future__ import annotations

import math

import pytest

from tritonrl_lib.eval import metrics as M
from tritonrl_lib.eval.record import format_table
from tritonrl_lib.verify.verdict import Verdict


def row(task: str, level: int, correct: bool, speedup: float | None = None, **extra) -> dict:
    v = Verdict(task_id=task, stage="timing" if speedup is not None else ("full" if correct else "tiny"),
                correct=correct, reason="ok" if correct else "mismatch:seed", speedup=speedup,
                kernel_time_ms=(1.0 / speedup if speedup else None))
    return M.sample_row(v, task_id=task, level=level, sample=0, model_stage="rl", extra=extra)


# task a (L1): 2.5x, 1.2x, wrong; task b (L1): 0.8x, exactly 1.5x; task c (L2): 3.0x, wrong, wrong
ROWS = [row("a", 1, True, 2.5), row("a", 1, True, 1.2), row("a", 1, False),
        row("b", 1, True, 0.8), row("b", 1, True, 1.5),
        row("c", 2, True, 3.0), row("c", 2, False), row("c", 2, False)]


def test_fast_p_counts_correct_samples_strictly_faster_than_p_over_all_samples():
    m = M.compute_metrics(ROWS, k=1)
    # 8 samples, 5 correct; > 1.0: 2.5 1.2 1.5 3.0; > 1.5: 2.5 3.0 (1.5 itself is not faster); > 2.0: 2.5 3.0
    assert m["fast_p"] == {"0": 62.5, "1.0": 50.0, "1.5": 25.0, "2.0": 25.0}
    assert m["fast_p"]["0"] == m["correct_rate"]
    assert (m["fast_p"]["1.0"], m["fast_p"]["2.0"]) == (m["fast1_rate"], m["fast2_rate"])  # the old keys agree
    assert m["geomean_speedup"] == pytest.approx((2.5 * 1.2 * 0.8 * 1.5 * 3.0) ** (1 / 5), abs=1e-4)


def test_fast_p_per_level():
    by = M.compute_metrics(ROWS, k=1)["by_level"]
    assert by["1"]["fast_p"] == {"0": 80.0, "1.0": 60.0, "1.5": 20.0, "2.0": 20.0}  # 5 samples: 4 correct
    assert by["2"]["fast_p"] == {"0": 33.33, "1.0": 33.33, "1.5": 33.33, "2.0": 33.33}


def test_fast_p_per_heldout_set():
    rows = [dict(r, heldout_set="tasks" if r["id"] == "a" else "families") for r in ROWS]
    by = M.compute_metrics(rows, k=1)["by_set"]
    assert by["tasks"]["fast_p"] == {"0": 66.67, "1.0": 66.67, "1.5": 33.33, "2.0": 33.33}
    assert by["families"]["fast_p"] == {"0": 60.0, "1.0": 40.0, "1.5": 20.0, "2.0": 20.0}


def test_untimed_correct_samples_give_none_above_zero_never_zero():
    rows = [row("a", 1, True), row("a", 1, False), row("b", 2, True), row("b", 2, False)]  # correct, not timed (CPU)
    m = M.compute_metrics(rows, k=1)
    assert m["fast_p"] == {"0": 50.0, "1.0": None, "1.5": None, "2.0": None}
    assert m["by_level"]["2"]["fast_p"] == {"0": 50.0, "1.0": None, "1.5": None, "2.0": None}
    assert m["geomean_speedup"] is None and m["fast1_rate"] is None
    # nothing correct: nothing can be fast, whether timed or not
    assert M.fast_p([row("a", 1, False)]) == {"0": 0.0, "1.0": 0.0, "1.5": 0.0, "2.0": 0.0}
    assert M.fast_p([]) == {"0": None, "1.0": None, "1.5": None, "2.0": None}


def test_baseline_blocks_are_none_without_baselines_and_count_only_covered_tasks():
    m = M.compute_metrics(ROWS, k=1)
    assert m["vs_compile"] is None and m["vs_eager_baseline"] is None
    assert m["by_level"]["1"]["vs_compile"] is None
    # a torch.compile time for tasks a and c only; speedups over it set by hand
    over = {("a", 2.5): 1.1, ("a", 1.2): 0.9, ("c", 3.0): 2.2}
    rows = []
    for r in ROWS:
        r = dict(r)
        if r["id"] in ("a", "c"):
            r["baseline_compile_ms"] = 1.0
            r["speedup_vs_compile"] = over.get((r["id"], r["speedup"]))
        rows.append(r)
    m = M.compute_metrics(rows, k=1)
    vc = m["vs_compile"]
    # 6 samples of a and c, 3 correct: 1.1, 0.9, 2.2
    assert vc["fast_p"] == {"0": 50.0, "1.0": 33.33, "1.5": 16.67, "2.0": 16.67}
    counts = (vc["num_samples"], vc["num_tasks"], vc["num_tasks_without"], vc["num_correct"], vc["num_timed"])
    assert counts == (6, 2, 1, 3, 3)
    assert vc["geomean_speedup"] == pytest.approx((1.1 * 0.9 * 2.2) ** (1 / 3), abs=1e-4)
    assert m["vs_eager_baseline"] is None  # no eager baseline attached
    assert m["by_level"]["2"]["vs_compile"]["fast_p"] == {"0": 33.33, "1.0": 33.33, "1.5": 33.33, "2.0": 33.33}
    assert m["by_level"]["1"]["vs_compile"]["num_tasks_without"] == 1


def test_fast_p_table_rows_per_reference():
    rec = {"metrics": M.compute_metrics(ROWS, k=1)}
    rows = M.fast_p_table({"rl": rec})
    assert [(r["level"], r["against"]) for r in rows] == [("all", "eager (verifier)"), ("L1", "eager (verifier)"),
                                                          ("L2", "eager (verifier)")]
    assert rows[0]["fast_1.5"] == 25.0 and rows[0]["samples"] == 8
    assert "fast_1.5" in format_table(rows).splitlines()[0]
    # a record written before fast_p existed still gives a row (fast_1.5 unknown)
    old = {"metrics": {"correct_rate": 50.0, "fast1_rate": 25.0, "fast2_rate": 0.0, "geomean_speedup": 1.1,
                       "num_samples": 4}}
    (r,) = M.fast_p_table({"sft": old})
    assert (r["fast_0"], r["fast_1.0"], r["fast_1.5"], r["fast_2.0"]) == (50.0, 25.0, None, 0.0)
    assert not math.isnan(r["geomean_speedup"])


def test_a_task_never_solved_needs_no_baseline_a_solved_one_without_it_is_left_out():
    """fast_p against torch.compile over all samples: a wrong sample is never fast, whatever the baseline,
    so measuring the solved tasks alone (`tritonrl baselines --solved-in`) counts every sample; a solved
    task without a baseline is the only unknown, and it is left out."""
    rows = []
    for r in ROWS:  # compile times for task a only (solved); b solved, no time; c solved, no time
        r = dict(r)
        if r["id"] == "a":
            r["baseline_compile_ms"] = 1.0
            r["speedup_vs_compile"] = {2.5: 1.1, 1.2: 0.9}.get(r["speedup"])
        rows.append(r)
    rows += [row("d", 2, False), row("d", 2, False)]  # never solved, never measured
    assert {r["id"] for r in M.baseline_rows(rows, "vs_compile")} == {"a", "d"}
    vc = M.compute_metrics(rows, k=1)["vs_compile"]
    # a's 3 samples (1.1x, 0.9x, wrong) and d's 2 wrong ones: 1 fast of 5
    assert vc["fast_p"]["1.0"] == 20.0 and (vc["num_samples"], vc["num_tasks"], vc["num_tasks_without"]) == (5, 2, 2)
    # Level 2 has no compile time (c solved, d never): c is left out, d's samples count, none fast; measured
    # for the record, so 0, not "not measured", though no Level-2 task was timed
    l2 = M.compute_metrics(rows, k=1)["by_level"]["2"]["vs_compile"]
    assert l2["fast_p"]["1.0"] == 0.0 and (l2["num_samples"], l2["num_tasks_without"]) == (2, 1)
    assert M.baseline_rows([row("d", 2, False)], "vs_compile") == []  # nothing measured anywhere
    # a table of several stages leaves out, for each, the tasks any of them solved without a time
    assert {r["id"] for r in M.baseline_rows(rows, "vs_compile", unknown={"b", "c", "d"})} == {"a"}
