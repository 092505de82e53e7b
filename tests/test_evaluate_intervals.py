"""Intervals that resample tasks, and RL minus SFT as a paired difference, on eval records built
from real verdict objects (metrics.py, evaluate.difference)."""

from __future__ import annotations

import json

import pytest

from tritonrl_lib.eval import metrics as M
from tritonrl_lib.eval.record import (EvalSampling, attach_comparison, build_record, compare_stages, difference,
                                      read_record, write_record)
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.verdict import Verdict

SAMPLING = EvalSampling(k=4, temperature=0.2, top_p=0.95, max_new_tokens=64, batch_size=8, seed=0)


def record(stage: str, solved: dict[str, int], sets: dict[str, str], k: int = 4) -> dict:
    """An eval record: task id -> how many of its k samples are correct."""
    tasks = [Task(id=tid, level=1, name=tid, source="x", meta={"heldout_set": sets[tid]}) for tid in solved]
    completions = [["```python\nclass ModelNew: pass\n```"] * k for _ in tasks]
    verdicts = [Verdict(task_id=t.id, stage="full" if j < solved[t.id] else "compile", correct=j < solved[t.id],
                        reason="ok" if j < solved[t.id] else "mismatch:original", reward=0.7 if j < solved[t.id] else 0.3)
                for t in tasks for j in range(k)]
    return build_record(model_stage=stage, model_path=stage, tasks=tasks, completions=completions, verdicts=verdicts,
                        sampling=SAMPLING, task_source="heldout", resamples=2000)


IDS = [f"t{i}" for i in range(16)]
SETS = {tid: ("tasks" if i < 8 else "families") for i, tid in enumerate(IDS)}


def test_an_interval_holds_the_rate_and_widens_with_fewer_tasks():
    rec = record("sft", {tid: (i % 5) for i, tid in enumerate(IDS)}, SETS)
    m = rec["metrics"]
    lo, hi = m["intervals"]["correct_rate"]
    assert lo < m["correct_rate"] < hi and 0 <= lo and hi <= 100
    few = record("sft", {tid: (i % 5) for i, tid in enumerate(IDS[:4])}, SETS)["metrics"]["intervals"]["correct_rate"]
    assert few[1] - few[0] > hi - lo
    assert M.bootstrap_interval(rec["detailed_results"]) == [lo, hi]  # the same seed: the same interval
    assert m["intervals"]["fast1_rate"] is None  # nothing timed
    assert set(m["by_set"]) == {"tasks", "families"} and m["by_set"]["tasks"]["num_tasks"] == 8
    assert m["by_set"]["tasks"]["intervals"]["correct_rate"][0] <= m["by_set"]["tasks"]["correct_rate"]
    assert rec["heldout_sets"] == {"tasks": IDS[:8], "families": IDS[8:]}


def test_rl_minus_sft_is_paired_by_task():
    sft = record("sft", {tid: 1 for tid in IDS}, SETS)
    better = record("rl", {tid: (3 if i < 8 else 1) for i, tid in enumerate(IDS)}, SETS)
    d = difference(better, sft, resamples=2000)
    a = d["by_set"]["tasks"]["correct_rate"]
    assert a["difference"] == pytest.approx(50.0) and a["interval"] == [50.0, 50.0] and a["above_zero"]
    b = d["by_set"]["families"]["correct_rate"]
    assert b["difference"] == 0.0 and b["above_zero"] is False
    overall = d["all"]["correct_rate"]
    assert overall["difference"] == pytest.approx(25.0) and overall["interval"][0] > 0 and overall["tasks"] == 16
    # a change on one task of sixteen is within the noise of which tasks were drawn
    one = record("rl", {tid: (4 if tid == "t0" else 1) for tid in IDS}, SETS)
    assert difference(one, sft)["all"]["correct_rate"]["interval"][0] <= 0
    assert set(compare_stages({"base": sft, "sft": sft, "rl": better})) == {"rl"}
    assert compare_stages({"rl": better}) == {}


def test_no_common_tasks_no_difference():
    a = record("rl", {"x": 1}, {"x": "tasks"})["detailed_results"]
    b = record("sft", {"y": 1}, {"y": "tasks"})["detailed_results"]
    assert M.paired_difference(a, b) is None


def test_the_comparison_is_written_into_the_rl_record_and_beside_it(tmp_path):
    sft = record("sft", {tid: 1 for tid in IDS}, SETS)
    rl = record("rl", {tid: 2 for tid in IDS}, SETS)
    files = {stage: write_record(tmp_path / f"eval_{stage}.json", rec) for stage, rec in (("sft", sft), ("rl", rl))}
    out = attach_comparison({"sft": (sft, files["sft"]), "rl": (rl, files["rl"])}, tmp_path / "comparison.json")
    on_disk = read_record(files["rl"])
    assert on_disk["vs_sft"] == out["rl"] and on_disk["vs_sft"]["all"]["correct_rate"]["difference"] == 25.0
    assert "vs_sft" not in read_record(files["sft"])
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert saved["baseline"] == "sft" and set(saved["stages"]) == {"rl"}
