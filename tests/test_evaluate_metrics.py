"""Evaluation metrics and the eval record, on fixture verdicts (no model, no verifier run)."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from tritonrl_lib.eval import metrics as M
from tritonrl_lib.eval.record import (EvalSampling, build_record, format_table, load_records, metrics_table,
                                      read_record, write_record)
from tritonrl_lib.eval.heldout import cap_tasks, stable_order
from tritonrl_lib.core.paths import RunPaths
from tritonrl_lib.rollout import Completion, SamplingConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.reward import compute_reward
from tritonrl_lib.verify.verdict import Verdict


def verdict(stage: str, correct: bool = False, speedup: float | None = None, reason: str = "",
            flags: tuple[str, ...] = ()) -> Verdict:
    """A verdict as the verifier writes one (reward from the real reward ladder)."""
    return Verdict(task_id="t", stage=stage, correct=correct, speedup=speedup, cheat_flags=list(flags),
                   reason=reason or ("ok" if correct else "mismatch:seed"),
                   reward=compute_reward(stage, flags, speedup))


def task(i: int, level: int) -> Task:
    return Task(id=f"builtin/L{level}/op{i}", level=level, name=f"op{i}",
                source=f"import torch\nclass Model(torch.nn.Module):\n    pass  # {i}\n")


# --------------------------------------------------------------------------- pass@k


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Enumerate every k-subset: the fraction holding at least one correct sample."""
    items = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(items[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(1, 0, 1), (1, 1, 1), (4, 1, 1), (4, 1, 2), (5, 2, 3), (6, 0, 4), (6, 5, 2),
                                   (7, 3, 7), (8, 4, 4)])
def test_pass_at_k_matches_enumeration(n, c, k):
    assert M.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)
    assert M.pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    # C(2000, 1000) does not fit a float; the product form stays exact enough
    assert M.pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    assert M.pass_at_k(2000, 0, 1000) == 0.0
    assert M.pass_at_k(2000, 1001, 1000) == 1.0
    assert 0.0 < M.pass_at_k(2000, 3, 10) < 1.0


def test_pass_at_1_is_the_fraction_correct():
    for n, c in [(10, 3), (4, 4), (3, 0)]:
        assert M.pass_at_k(n, c, 1) == pytest.approx(c / n)


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (3, 1, 0), (3, 1, 4), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        M.pass_at_k(n, c, k)


# --------------------------------------------------------------------------- per-level metrics


def rows_from(samples: list[tuple[str, int, Verdict]]) -> list[dict]:
    counter: dict[str, int] = {}
    out = []
    for tid, level, v in samples:
        j = counter.get(tid, 0)
        counter[tid] = j + 1
        out.append(M.sample_row(v, task_id=tid, level=level, sample=j, model_stage="sft"))
    return out


def test_funnel_rates_per_level_with_timing():
    rows = rows_from([
        # level 1: a, 2 samples; b, 2 samples
        ("a", 1, verdict("timing", True, speedup=2.5)),
        ("a", 1, verdict("timing", True, speedup=0.5)),
        ("b", 1, verdict("compile", reason="mismatch:scaled")),
        ("b", 1, verdict("extract", reason="static:no_triton_kernel")),
        # level 2: c, 2 samples
        ("c", 2, verdict("timing", True, speedup=1.5)),
        ("c", 2, verdict("none", reason="no_code")),
    ])
    m = M.compute_metrics(rows, k=2)
    assert (m["num_samples"], m["num_tasks"]) == (6, 3)
    # valid = passed static: stages compile/timing (4 of 6); compiled likewise here
    assert m["valid_rate"] == pytest.approx(66.67)
    assert m["compiled_rate"] == pytest.approx(66.67)
    assert m["correct_rate"] == 50.0
    assert m["fast1_rate"] == pytest.approx(33.33)  # 2.5x and 1.5x
    assert m["fast2_rate"] == pytest.approx(16.67)  # 2.5x only
    assert m["geomean_speedup"] == pytest.approx((2.5 * 0.5 * 1.5) ** (1 / 3), rel=1e-3)
    # pass@1 per task: a 1.0, b 0.0, c 0.5 -> 50%; pass@2: a 1, b 0, c 1 -> 66.67%
    assert m["pass_at_1"] == 50.0
    assert m["pass_at_k"] == pytest.approx(66.67)
    l1, l2 = m["by_level"]["1"], m["by_level"]["2"]
    assert (l1["num_tasks"], l1["correct_rate"], l1["fast2_rate"], l1["pass_at_k"]) == (2, 50.0, 25.0, 50.0)
    assert (l2["num_tasks"], l2["valid_rate"], l2["fast1_rate"], l2["pass_at_1"]) == (1, 50.0, 50.0, 50.0)


def test_static_pass_is_valid_but_not_compiled():
    rows = rows_from([("a", 1, verdict("static", reason="compile_error"))])
    m = M.compute_metrics(rows, k=1)
    assert (m["valid_rate"], m["compiled_rate"], m["correct_rate"]) == (100.0, 0.0, 0.0)


def test_cpu_run_reports_speed_as_not_measured_not_zero():
    # on a CPU the verifier stops at `full`: correct, no speedup
    rows = rows_from([("a", 1, verdict("full", True)), ("b", 1, verdict("tiny", reason="mismatch:tiny"))])
    m = M.compute_metrics(rows, k=1)
    assert m["correct_rate"] == 50.0
    assert m["fast1_rate"] is None and m["fast2_rate"] is None and m["geomean_speedup"] is None


def test_nothing_correct_means_nothing_fast_even_without_timing():
    rows = rows_from([("a", 1, verdict("compile", reason="mismatch:seed"))])
    m = M.compute_metrics(rows, k=1)
    assert m["fast1_rate"] == 0.0 and m["fast2_rate"] == 0.0 and m["geomean_speedup"] is None


def test_cheat_flagged_fast_sample_counts_neither_correct_nor_fast():
    cheat = verdict("timing", False, speedup=50.0, reason="cheat:cached_output", flags=("cached_output",))
    assert cheat.reward == 0.0
    rows = rows_from([("a", 1, cheat), ("a", 1, verdict("timing", True, speedup=1.2))])
    m = M.compute_metrics(rows, k=2)
    assert m["correct_rate"] == 50.0 and m["fast1_rate"] == 50.0 and m["fast2_rate"] == 0.0
    assert m["geomean_speedup"] == pytest.approx(1.2)
    assert rows[0]["cheat_flags"] == ["cached_output"]


def test_pass_at_k_leaves_out_tasks_with_fewer_samples():
    rows = rows_from([("a", 1, verdict("full", True)), ("a", 1, verdict("none", reason="no_code")),
                      ("b", 1, verdict("none", reason="no_code"))])
    m = M.compute_metrics(rows, k=2)
    assert m["pass_at_k"] == 100.0  # only task a has 2 samples
    assert m["pass_at_1"] == 25.0  # a: 0.5, b: 0
    assert M.compute_metrics(rows_from([("b", 1, verdict("full", True))]), k=3)["pass_at_k"] is None


def test_non_finite_speedup_is_dropped():
    rows = rows_from([("a", 1, verdict("timing", True, speedup=float("inf")))])
    assert rows[0]["speedup"] is None
    json.dumps(rows)  # strict JSON: no Infinity


def test_failure_reasons_group_by_head():
    rows = rows_from([("a", 1, verdict("compile", reason="mismatch:scaled")),
                      ("a", 1, verdict("compile", reason="mismatch:seed")),
                      ("b", 1, verdict("static", reason="compile_error")),
                      ("b", 1, verdict("full", True))])
    assert M.failure_reasons(rows) == [("mismatch", 2), ("compile_error", 1)]
    assert dict(M.failure_reasons(rows, detail=True)) == {"mismatch:scaled": 1, "mismatch:seed": 1,
                                                          "compile_error": 1}
    assert M.failure_reasons(rows, top=1) == [("mismatch", 2)]


def test_looped_samples_are_counted_and_fail_as_loop():
    """A sample the rollout stopped in a loop counts in loop_rate and fails under `loop`, whatever the
    verifier made of the code the loop cut off; rows from before the rule (no loop) still read."""
    rows = rows_from([("a", 1, verdict("none", reason="no_code")), ("a", 1, verdict("static", reason="static:syntax")),
                      ("b", 1, verdict("compile", reason="mismatch:seed")), ("b", 1, verdict("full", True))])
    for r, why in zip(rows, ("loop", "loop", "length", "fence")):
        r["finish_reason"] = why
    m = M.compute_metrics(rows, k=2)
    assert (m["num_loop"], m["loop_rate"]) == (2, 50.0)
    assert m["by_level"]["1"]["loop_rate"] == 50.0
    assert M.failure_reasons(rows) == [("loop", 2), ("mismatch", 1)]
    assert dict(M.failure_reasons(rows, detail=True)) == {"loop": 2, "mismatch:seed": 1}
    rows[3]["finish_reason"] = "loop"  # correct despite the loop (the code closed before it): not a failure
    assert M.failure_reasons(rows) == [("loop", 2), ("mismatch", 1)] and M.compute_metrics(rows, 2)["loop_rate"] == 75.0
    older = [{k: v for k, v in r.items() if k != "finish_reason"} for r in rows]  # completions given as text
    assert (M.summarize(older, 2)["num_loop"], M.summarize(older, 2)["loop_rate"]) == (None, None)
    assert M.failure_reasons(older) == [("no_code", 1), ("static", 1), ("mismatch", 1)]
    before_the_rule = [{**r, "finish_reason": "length"} for r in rows]
    assert M.summarize(before_the_rule, 2)["loop_rate"] == 0.0


def test_a_record_from_rollout_completions_counts_its_loops():
    tasks = [task(1, 1)]
    looped = "```python\n" + "import triton.language as tl\n" * 16
    comps = [[Completion(0, j, text, [1] * n, n, 10, why, 0.1)
              for j, (text, n, why) in enumerate([(looped, 140, "loop"), ("```python\nx\n```", 9, "fence")])]]
    rec = build_record(model_stage="sft", model_path="m", tasks=tasks, completions=comps,
                       verdicts=[verdict("none", reason="no_code"), verdict("compile", reason="mismatch:seed")],
                       sampling=sampling(), task_source="builtin")
    rec = json.loads(json.dumps(rec))
    assert [r["finish_reason"] for r in rec["detailed_results"]] == ["loop", "fence"]
    assert rec["metrics"]["loop_rate"] == 50.0 and rec["metrics"]["num_loop"] == 1
    assert rec["sampling"]["loop_lines"] == SamplingConfig().loop_lines  # in the fingerprint: older records redo
    assert M.failure_reasons(rec["detailed_results"]) == [("loop", 1), ("mismatch", 1)]


# --------------------------------------------------------------------------- the eval record


def sampling(k: int = 2) -> EvalSampling:
    return EvalSampling(k=k, temperature=0.8, top_p=0.95, max_new_tokens=64, batch_size=8, seed=3,
                        notes=["sampled at temperature 0.8"])


def test_record_has_the_source_layout_and_is_json():
    tasks = [task(1, 1), task(2, 2)]
    completions = [["```python\na\n```", "b"], ["c", "d"]]
    verdicts = [verdict("full", True), verdict("none", reason="no_code"),
                verdict("compile", reason="mismatch:seed"), verdict("timing", True, speedup=1.7)]
    rec = build_record(model_stage="sft", model_path="outputs/x/checkpoints/sft", tasks=tasks, completions=completions,
                       verdicts=verdicts, sampling=sampling(), task_source="heldout", device="cpu (2 cores)",
                       wall_s=12.345)
    rec = json.loads(json.dumps(rec))  # survives a strict JSON round trip
    assert rec["model_path"] == "outputs/x/checkpoints/sft" and rec["num_tasks"] == 2
    for key in ("valid_rate", "compiled_rate", "correct_rate", "fast1_rate", "fast2_rate", "geomean_speedup",
                "pass_at_1", "pass_at_k"):
        assert key in rec["metrics"] and key in rec["metrics"]["by_level"]["2"]
    assert rec["metrics"]["correct_rate"] == 50.0
    assert (rec["seed"], rec["k"], rec["task_source"], rec["wall_s"]) == (3, 2, "heldout", 12.35)
    rows = rec["detailed_results"]
    assert len(rows) == 4
    assert [(r["id"], r["sample"], r["level"]) for r in rows] == [
        (tasks[0].id, 0, 1), (tasks[0].id, 1, 1), (tasks[1].id, 0, 2), (tasks[1].id, 1, 2)]
    first = rows[0]
    for key in ("id", "stage", "reward", "reason", "level", "sample", "correct", "speedup", "cheat_flags",
                "model_stage", "completion"):
        assert key in first
    assert (first["stage"], first["model_stage"], first["reward"]) == ("full", "sft", 0.7)
    assert first["completion"] == "```python\na\n```"
    assert "sampled at temperature 0.8" in rec["notes"]
    # one correct sample (L1, full) was not timed, but the L2 one was: speed is partly measured
    assert rec["metrics"]["fast1_rate"] == 25.0


def test_record_rejects_mismatched_verdicts():
    with pytest.raises(ValueError, match="3 verdicts for 2 completions"):
        build_record(model_stage="base", model_path="m", tasks=[task(1, 1)], completions=[["a", "b"]],
                     verdicts=[verdict("none")] * 3, sampling=sampling(), task_source="builtin")


def test_records_round_trip_and_table(tmp_path):
    paths = RunPaths(tmp_path / "run")
    tasks = [task(1, 1)]
    for stage, v in (("rl", verdict("full", True)), ("base", verdict("none", reason="no_code"))):
        rec = build_record(model_stage=stage, model_path=stage, tasks=tasks, completions=[["x"]], verdicts=[v],
                           sampling=sampling(1), task_source="builtin")
        write_record(paths.eval_file(stage), rec)
    paths.eval_file("sft").write_text("{ torn")  # a half-written record is ignored, not fatal
    assert read_record(paths.eval_file("sft")) is None
    records = load_records(paths)
    assert list(records) == ["base", "rl"]
    table = metrics_table(records)
    assert [(r["stage"], r["level"], r["correct_rate"]) for r in table] == [
        ("base", "all", 0.0), ("base", "L1", 0.0), ("rl", "all", 100.0), ("rl", "L1", 100.0)]
    text = format_table(table)
    assert "correct%" in text and "100.0" in text and text.count("\n") == 4


# --------------------------------------------------------------------------- task capping


def test_cap_is_deterministic_balanced_and_seed_free():
    tasks = [task(i, 1) for i in range(10)] + [task(i, 2) for i in range(4)]
    shuffled = tasks[:]
    random.Random(1).shuffle(shuffled)
    a, b = cap_tasks(tasks, 6), cap_tasks(shuffled, 6)
    assert [t.id for t in a] == [t.id for t in b]
    assert sum(t.level == 1 for t in a) == 3 and sum(t.level == 2 for t in a) == 3
    assert [(t.level, t.id) for t in a] == sorted((t.level, t.id) for t in a)
    assert len(cap_tasks(tasks, 0)) == 14 and len(cap_tasks(tasks, 100)) == 14
    # a cap of 10 takes all 4 level-2 tasks and 6 level-1 tasks
    assert sum(t.level == 2 for t in cap_tasks(tasks, 10)) == 4
    # growing the cap only adds tasks
    assert {t.id for t in cap_tasks(tasks, 4)} <= {t.id for t in cap_tasks(tasks, 8)}
    assert len(stable_order(tasks)) == 14


def test_an_evaluations_fingerprint_leaves_out_what_only_changes_verification_speed():
    """Another worker count or reference cache verifies faster or slower, never otherwise: the record
    (and an unfinished evaluation's saved completions) stays valid. A tolerance, the prescreen (a failing
    candidate's reason may differ with it) and the workers sharing a GPU (they size a large task's sets)
    are part of it."""
    import dataclasses

    from tritonrl_lib.core.config import VERIFY_SPEED_ONLY, load_config
    from tritonrl_lib.eval.record import fingerprint

    cfg = load_config("smoke")
    tasks = [task(1, 1)]

    def fp(**verify):
        c = dataclasses.replace(cfg, verify=dataclasses.replace(cfg.verify, **verify))
        return fingerprint(model_stage="sft", spec="tiny", tasks=tasks, sampling=sampling(), cfg=c, device="cpu")

    assert "reference_cache_mb" in VERIFY_SPEED_ONLY and "prescreen" not in VERIFY_SPEED_ONLY
    assert fp() == fp(reference_cache_mb=0, spare_children=2, workers=5, prestart_child="off", cuda_connections=4)
    assert fp() != fp(atol=1e-3) and fp() != fp(num_variations=2)
    assert fp() != fp(prescreen="off") and fp() != fp(workers_per_gpu=3)
