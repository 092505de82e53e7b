"""The whole pipeline, end to end: the real notebooks 01 -> 05 on the smoke profile (tiny model,
a handful of tasks), into a temporary outputs folder, as `tritonrl run --params smoke` runs them.

Checks what a user reads at the end: report.html exists and holds the metrics table with numbers
for every model stage, every stage left its artefacts where RunPaths says, the terminal showed the
notebooks' progress, the executed notebooks hold their charts and no warnings. Then the sequence of
issue 18: 03_rl re-run by papermill with other settings; the report notebook alone never describes
the replaced adapter's evaluation as current; the next `tritonrl run` redoes 03 -> 05."""

from __future__ import annotations

import json
import re
import math

import pytest

from tritonrl_lib.eval.identity import model_identity
from tritonrl_lib.run.pipeline import discover_notebooks, notebooks_dir
from tritonrl_lib.report.build import parse_table

NOTEBOOKS = ("01_data", "02_sft", "03_rl", "04_eval", "05_report")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def _missing_notebooks() -> list[str]:
    have = {nb.stem for nb in discover_notebooks(notebooks_dir())}
    return [nb for nb in NOTEBOOKS if nb not in have]


@pytest.mark.skipif(bool(_missing_notebooks()), reason=f"notebook {', '.join(_missing_notebooks())} missing")
def test_smoke_pipeline_runs_01_to_05_and_writes_the_report(run_dir):
    from tritonrl_lib.run.pipeline import run_pipeline

    lines: list[str] = []
    result = run_pipeline("smoke", run="e2e", overrides={"outputs_dir": str(run_dir)}, log=lines.append, live=False)
    assert [s.notebook for s in result.steps] == list(NOTEBOOKS)
    assert all(s.status == "ran" for s in result.steps), lines
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
    assert {r["model"] for r in rows} == {"base", "sft", "rl"}
    for r in rows:
        for col in ("valid %", "compiled %", "correct %", "pass@1 %"):
            value = float(r[col])  # a number, not n/a: these are always measured
            assert 0.0 <= value <= 100.0 and not math.isnan(value)
    assert parse_table(page, "comparison") and parse_table(page, "timings")
    assert "data:image/png;base64," in page
    assert paths.chart("report_sft_loss").is_file()
    # the executed notebooks are kept beside the outputs, with their charts inline and no warnings
    for nb in NOTEBOOKS:
        cells = json.loads(paths.executed_notebook(nb).read_text())["cells"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        text = "".join("".join(o.get("text", "")) for o in outputs)
        assert "Warning" not in text and "IProgress" not in text, (nb, text[:2000])
        charts = sum("image/png" in o.get("data", {}) for o in outputs)
        assert charts or "(no chart: " in text, nb  # a chart, or the sentence saying why there is none
        if nb in ("01_data", "02_sft", "05_report"):
            assert charts, nb
    # the terminal showed each notebook's own lines and its progress counts as it ran
    terminal = "\n".join(lines)
    assert "      SFT: " in terminal and "      RL best-of-N: " in terminal
    assert "      rollout: 4/4 (100%)" in terminal
    # the run's models are verified together, in one pass, after each has generated; an RL round that kept
    # nothing saves SFT's weights again, and then rl takes sft's record instead of being verified beside it
    rl_twin = json.loads(paths.eval_file("rl").read_text()).get("reused_from") == "sft"
    joint = "base \\+ sft" if rl_twin else "base \\+ sft \\+ rl"
    assert re.search(rf"      {joint}: verifying \d+ completions in one pass", terminal), terminal[-3000:]
    assert not rl_twin or "rl: its weights are byte for byte those of sft, evaluated beside it" in terminal

    _issue_18_sequence(run_dir, paths)


def _issue_18_sequence(run_dir, paths):
    """papermill 03 with other settings, then the report alone, then `tritonrl run` again."""
    import papermill

    from tritonrl_lib.run.pipeline import run_pipeline

    def papermill_run(nb: str, **params):
        papermill.execute_notebook(str(notebooks_dir() / f"{nb}.ipynb"), str(run_dir / f"{nb}.alone.ipynb"),
                                   kernel_name="python3", progress_bar=False, cwd=str(notebooks_dir().parent),
                                   parameters={"profile": "smoke", "run": "e2e", "outputs_dir": str(run_dir), **params})

    evaluated = json.loads(paths.eval_file("rl").read_text())["fingerprint"]["model"]
    papermill_run("03_rl", n_samples=3)  # clears and retrains the RL adapter
    assert model_identity(str(paths.rl_checkpoint)) != evaluated
    first = json.loads(paths.rl_log.read_text().splitlines()[0])
    # n_samples=3 per group, 2 groups kept; groups without signal are drawn again (rl.redraw_rounds)
    assert first["signal"]["groups"] == 2 and first["samples"] == 3 * first["signal"]["drawn"], first

    # the report notebook alone: the RL evaluation describes an adapter that no longer exists
    papermill_run("05_report")
    page = paths.report_html.read_text()
    assert {r["model"] for r in parse_table(page, "metrics")} == {"base", "sft"}
    assert "Out of date, and left out of this report" in page and "rl: its evaluation is left out" in page

    # the next `tritonrl run` notices, and redoes 03 (with the run's own settings) and what follows
    lines: list[str] = []
    again = run_pipeline("smoke", run="e2e", overrides={"outputs_dir": str(run_dir)}, log=lines.append, live=False)
    assert [s.status for s in again.steps] == ["skipped", "skipped", "ran", "ran", "ran"], lines
    assert "checkpoints/rl" in again.steps[2].why and "changed after it finished" in again.steps[2].why
    first = json.loads(paths.rl_log.read_text().splitlines()[0])
    assert first["samples"] == 2 * first["signal"]["drawn"], first  # n_samples 2 again (redrawn groups too)
    record = json.loads(paths.eval_file("rl").read_text())
    assert record["fingerprint"]["model"] == model_identity(str(paths.rl_checkpoint))
    page = paths.report_html.read_text()
    assert {r["model"] for r in parse_table(page, "metrics")} == {"base", "sft", "rl"}
    assert "Out of date" not in page
    assert "n_samples: 2" in paths.config_snapshot.read_text()
    # and a run with nothing changed redoes nothing
    last = run_pipeline("smoke", run="e2e", overrides={"outputs_dir": str(run_dir)}, log=lambda s: None, live=False)
    assert all(s.status == "skipped" for s in last.steps)
