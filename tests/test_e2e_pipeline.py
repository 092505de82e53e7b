"""The whole pipeline, end to end: the real notebooks 01 -> 05 on the smoke profile (tiny model,
a handful of tasks), into a temporary outputs folder, as `tritonrl run --params smoke` runs them.

Checks what a user reads at the end: report.html exists and holds the metrics table with numbers
for every model stage, and every stage left its artefacts where RunPaths says."""

from __future__ import annotations

import json
import math

import pytest

from tritonrl_lib.pipeline import discover_notebooks, notebooks_dir
from tritonrl_lib.report import parse_table

NOTEBOOKS = ("01_data", "02_sft", "03_rl", "04_eval", "05_report")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _missing_notebooks() -> list[str]:
    have = {nb.stem for nb in discover_notebooks(notebooks_dir())}
    return [nb for nb in NOTEBOOKS if nb not in have]


@pytest.mark.skipif(bool(_missing_notebooks()), reason=f"notebook {', '.join(_missing_notebooks())} missing")
def test_smoke_pipeline_runs_01_to_05_and_writes_the_report(run_dir):
    from tritonrl_lib.pipeline import run_pipeline

    lines: list[str] = []
    result = run_pipeline("smoke", run="e2e", overrides={"outputs_dir": str(run_dir)}, log=lines.append)
    assert [s.notebook for s in result.stages] == list(NOTEBOOKS)
    assert all(s.status == "ran" for s in result.stages), lines
    paths = result.config.paths

    # every stage's artefacts, at the paths RunPaths names
    assert paths.split.is_file() and paths.sft_train.is_file()
    assert paths.sft_log.is_file() and paths.rl_log.is_file()
    for stage in ("base", "sft", "rl"):
        rec = json.loads(paths.eval_file(stage).read_text())
        assert rec["num_tasks"] == len(rec["task_ids"]) > 0
        assert len(rec["detailed_results"]) == rec["num_tasks"] * rec["k"]
    timings = json.loads(paths.timings.read_text())
    assert set(timings) == set(NOTEBOOKS) and all(t["wall_s"] > 0 for t in timings.values())

    # the report: a page with the metrics table, numbers in it, for base, sft and rl
    page = paths.report_html.read_text()
    rows = parse_table(page, "metrics")
    assert {r["stage"] for r in rows} == {"base", "sft", "rl"}
    for r in rows:
        for col in ("valid %", "compiled %", "correct %", "pass@1 %"):
            value = float(r[col])  # a number, not n/a: these are always measured
            assert 0.0 <= value <= 100.0 and not math.isnan(value)
    assert parse_table(page, "comparison") and parse_table(page, "timings")
    assert "data:image/png;base64," in page
    assert paths.chart("report_funnel").is_file()
    # the executed notebooks are kept beside the outputs
    assert (paths.notebooks_dir / "05_report.ipynb").is_file()
