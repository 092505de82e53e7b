"""The report's details a new user tripped over: each note said once, the 7B setup only where it
informs, every count of tasks the same count, a cost table that counts each notebook once after a
partial rerun, and a notebook stopped part-way called interrupted. Run folders as the stages and
`tritonrl run` leave them (tests/report_fixtures.py)."""

from __future__ import annotations

import html
import re

import pytest

from report_fixtures import cpu_run, finish_steps, gpu_run, started_notebook
from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.baselines import NOTE_PREFIX
from tritonrl_lib.eval.record import read_record
from tritonrl_lib.report.build import build_report, parse_table
from tritonrl_lib.run import state as run_state


def page_text(report) -> str:
    """What a reader reads: the page without its tags, entities decoded, spaces collapsed."""
    raw = report.html_path.read_text()
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", raw)))


def _said(text: str, note: str) -> int:
    return text.count(re.sub(r"\s+", " ", note.replace("`", "")))


def test_each_note_is_said_once_and_the_details_table_holds_no_long_notes(run_dir):
    cfg, paths = cpu_run(run_dir)
    report = build_report(cfg, paths)
    text = page_text(report)
    notes = {n for stage in ("base", "sft", "rl") for n in read_record(paths.eval_file(stage))["notes"]}
    baselines_note = next(n for n in notes if n.startswith(NOTE_PREFIX))
    assert all(n in read_record(paths.eval_file(s))["notes"] for s in ("base", "sft", "rl") for n in [baselines_note])
    for note in notes:  # three records carry the baselines note: the page says it once
        assert _said(text, note) == 1, note
    assert "byte-identical weights (rl only)" in text  # a note of one model says which
    assert "why: in the notes from the evaluation below" in text  # the speed section points there, not repeats it
    rows = parse_table(report.html_path.read_text(), "evaluation")
    assert [r["model"] for r in rows] == ["base", "sft", "rl"] and all("notes" not in r for r in rows)
    assert rows[1]["loaded from"] == str(paths.sft_checkpoint)


def test_the_7b_setup_shows_on_a_gpu_run_only_as_figures_measured_elsewhere(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    cfg, paths = cpu_run(tmp_path / "a")
    cpu = build_report(cfg, paths)
    assert cpu.tables["scale_cost"] == [] and "7B" not in page_text(cpu)
    assert parse_table(cpu.html_path.read_text(), "scale_cost") == []
    cfg, paths = gpu_run(tmp_path / "b")
    gpu = build_report(cfg, paths)
    rows = parse_table(gpu.html_path.read_text(), "scale_cost")
    assert rows and {r["GPUs"] for r in rows} == {"1", "8"}
    assert "The published setup at 7B: figures measured elsewhere, not by this run" in page_text(gpu)


def test_every_count_of_tasks_is_the_same_count(run_dir):
    cfg, paths = cpu_run(run_dir)  # the cpu profile: num_tasks 2 per held-out set, two sets: 4 tasks
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    counted = "4 tasks in all (2 unseen tasks of families trained on, 2 tasks of unseen families)"
    assert f"evaluation on {counted}" in report.description[1]  # the banner
    assert report.headline[0].startswith(f"Evaluated on {counted}")  # the headline
    assert all(r["tasks"].startswith(counted) for r in parse_table(page, "comparison")
               if r["source"] == "measured in this run")
    assert {r["tasks"] for r in parse_table(page, "evaluation")} == {"4"}
    assert {r["tasks"] for r in parse_table(page, "metrics") if r["level"] == "all"} == {"4"}
    assert {r["setting"]: r["value"] for r in parse_table(page, "settings")}["num_tasks (per held-out set)"] == "2"
    assert not re.search(r"\b2 task\(s\)", page_text(report))
    # before any evaluation the banner says what the settings plan, counted the same way
    empty = build_report(load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": "fresh"}))
    assert ("evaluation on up to 2 tasks from each of 2 held-out sets (unseen tasks of families trained on; tasks "
            "of unseen families), up to 4 in all x 1 sample(s) per model") in empty.description[1]


def test_a_gpu_run_counts_its_kernelbench_problems_in_the_same_total(tmp_path):
    cfg, paths = gpu_run(tmp_path)
    report = build_report(cfg, paths)
    assert report.headline[0].endswith("RL trained on the other 9); all of them evaluated.")
    evaluated = next(line for line in report.headline if line.startswith("Evaluated on "))
    assert evaluated.startswith("Evaluated on 9 tasks in all (2 unseen tasks of families trained on, 2 tasks of "
                                "unseen families, 5 held-out KernelBench problems)")
    assert {r["tasks"] for r in parse_table(report.html_path.read_text(), "evaluation")} == {"9"}


def _cost(report) -> list[dict[str, str]]:
    return parse_table(report.html_path.read_text(), "timings")


def test_after_a_partial_rerun_the_cost_table_counts_each_notebook_once(run_dir, monkeypatch):
    cfg, paths = cpu_run(run_dir)  # 01 -> 05 finished: 41.2 + 118.5 + 96.0 + 190.4 + 9.1 s
    # `tritonrl run` again, settings changed for RL: 03_rl and 04_eval run again, and now 05_report runs
    # (the runner removed 05's record as it started it, and names it in the kernel's environment)
    finish_steps(cfg, paths, {"03_rl": 120.0, "04_eval": 200.0}, "cpu (2 cores, x86_64)",
                 finished="2026-11-26T09:00:00")
    paths.step_record("05_report").unlink()
    monkeypatch.setenv(run_state.RUNNER_STEP, "05_report")
    report = build_report(cfg, paths)
    rows = _cost(report)
    counted = [(r["notebook"], r["wall-clock s"]) for r in rows if r["in the total"] == "yes"]
    assert counted == [("01_data", "41.20"), ("02_sft", "118.5"), ("03_rl", "120.0"), ("04_eval", "200.0")]
    previous = next(r for r in rows if r["notebook"] == "05_report")
    assert previous["in the total"].startswith("no") and "the previous run" in previous["which run"]
    assert rows[-1]["notebook"] == "total"
    assert float(rows[-1]["wall-clock s"]) == pytest.approx(41.2 + 118.5 + 120 + 200)
    assert report.headline[-1] == ("Wall-clock 8m 00s (no GPU): 4 notebook(s), each counted once (the run of it that "
                                   "made what the run folder holds).")


def test_a_notebook_stopped_by_ctrl_c_is_interrupted_and_its_earlier_run_is_not_added(run_dir):
    cfg, paths = cpu_run(run_dir)
    run_state.write_interrupted(paths, "03_rl", "Ctrl-C", 490.0)  # rerun of 03_rl, stopped 8m 10s in
    report = build_report(cfg, paths)
    rows = [r for r in _cost(report) if r["notebook"] == "03_rl"]
    assert [r["in the total"] for r in rows] == ["no: run again since", "yes"]
    assert rows[1]["which run"].startswith("interrupted (Ctrl-C) on ") and rows[1]["wall-clock s"] == "490.0"
    assert float(_cost(report)[-1]["wall-clock s"]) == pytest.approx(41.2 + 118.5 + 490 + 190.4 + 9.1)
    line = next(m for m in report.missing if m.startswith("03_rl: "))
    assert line.startswith("03_rl: interrupted (Ctrl-C) on ") and "8m 10s in, before it finished" in line
    assert "not run by" not in page_text(report)


def test_a_run_that_did_not_finish_is_billed_by_the_device_it_started_on(run_dir):
    # a GPU run interrupted or failed has no timings entry: the device the runner recorded when the step
    # started is what its GPU-hours are counted on (wall x GPUs)
    cfg, paths = cpu_run(run_dir)
    h100x2 = ("2x NVIDIA H100 80GB HBM3", 2)
    run_state.write_started(paths, "03_rl", h100x2)
    run_state.write_interrupted(paths, "03_rl", "Ctrl-C", 1800.0, h100x2)
    run_state.write_started(paths, "04_eval", ("1x NVIDIA H100 80GB HBM3", 1))
    run_state.write_failed(paths, "04_eval", "RuntimeError", 720.0, ("1x NVIDIA H100 80GB HBM3", 1))
    rows = _cost(build_report(cfg, paths))
    rl = next(r for r in rows if r["notebook"] == "03_rl" and r["in the total"] == "yes")
    assert rl["which run"].startswith("interrupted (Ctrl-C)") and rl["device"] == h100x2[0]
    assert rl["GPUs"] == "2" and float(rl["GPU-hours"]) == pytest.approx(1.0)
    ev = next(r for r in rows if r["notebook"] == "04_eval" and r["in the total"] == "yes")
    assert ev["which run"].startswith("failed (RuntimeError)") and float(ev["GPU-hours"]) == pytest.approx(0.2)
    assert float(rows[-1]["GPU-hours"]) == pytest.approx(1.2)  # the CPU steps add none


def test_a_run_folder_from_before_devices_were_recorded_says_what_its_gpu_hours_leave_out(run_dir):
    cfg, paths = cpu_run(run_dir)
    run_state.write_interrupted(paths, "03_rl", "Ctrl-C", 490.0)  # written without a device
    rows = _cost(build_report(cfg, paths))
    rl = next(r for r in rows if r["notebook"] == "03_rl" and r["in the total"] == "yes")
    assert rl["device"] == "not recorded" and rl["GPUs"] == rl["GPU-hours"] == "n/a"
    assert "1 ran on a device that was not recorded" in rows[-1]["which run"]


def test_a_run_killed_outright_before_its_first_checkpoint_is_reported_interrupted(run_dir):
    cfg = load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": "killed"})
    paths = cfg.paths.ensure()
    finish_steps(cfg, paths, {"01_data": 41.2}, "cpu (2 cores, x86_64)")
    # kill -9 of `tritonrl run` during 02_sft's first minutes: the runner had removed 02's record as
    # it started it; papermill's copy of the notebook is all that is left, started and never ended
    started_notebook(paths, "02_sft", cells_done=2, started_s_ago=125.0)
    report = build_report(cfg, paths)
    line = next(m for m in report.missing if m.startswith("02_sft: "))
    assert line.startswith("02_sft: interrupted (the run was stopped without a word: killed, or its machine "
                           "stopped) on ") and re.search(r"at least 2m 0[4-9]s in, before it finished", line), line
    assert any(m.startswith("sft: no trained model at ") for m in report.missing)
    row = next(r for r in _cost(report) if r["notebook"] == "02_sft")
    assert row["which run"].startswith("interrupted (") and row["in the total"] == "yes"
    assert "not run by" not in page_text(report)


def test_a_failed_notebook_is_said_with_its_error(run_dir):
    cfg = load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": "failed"})
    paths = cfg.paths.ensure()
    out = started_notebook(paths, "01_data", cells_done=1, error="ConfigError")
    line = next(m for m in build_report(cfg, paths).missing if m.startswith("01_data: "))
    assert line.startswith("01_data: failed (ConfigError) on ") and str(out) in line


REFERENCE = {"measured": "2026-11-27", "machine": "one H100", "command": "python benchmarks/gpu_rl_session.py R",
             "profile": "gpu", "tables": {
                 "kernelbench": [{"stage": "sft", "level": "L1", "problems": 35, "samples": 140,
                                  "correct % [95% CI]": "12.1 [5.0, 20.0]"}],
                 "kernelbench_categories": [], "builtin": [], "vs_sft": [], "rl_rounds": []}}


def test_a_demonstration_shows_a_kept_gpu_run_labelled_as_another_run(tmp_path, monkeypatch):
    from tritonrl_lib.report import build as B
    from tritonrl_lib.report.reference_run import reference_from_summary

    monkeypatch.setattr(B, "load_reference", lambda: REFERENCE)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    cfg, paths = cpu_run(tmp_path / "a")
    demo = build_report(cfg, paths)
    assert demo.demonstration and demo.reference == REFERENCE
    text = page_text(demo)
    assert "What a real GPU run gave (another run, kept in the repository)" in text and "Not this run." in text
    assert parse_table(demo.html_path.read_text(), "reference_kernelbench")[0]["correct % [95% CI]"] == "12.1 [5.0, 20.0]"
    assert "reference" in demo.charts and demo.charts["reference"].is_file()  # its figures drawn too
    assert '<img alt="kept run"' in demo.html_path.read_text()
    cfg, paths = gpu_run(tmp_path / "b")  # a real run shows its own figures only
    real = build_report(cfg, paths)
    assert real.reference is None and "another run, kept in the repository" not in page_text(real)
    assert "reference" not in real.charts
    # the kept file is made from a session's summary: the KernelBench tables and the built-in sets
    summary = {"profile": "gpu", "kernelbench": {"headline": REFERENCE["tables"]["kernelbench"], "categories": []},
               "eval": {"sft": {"metrics": {"by_set": {"tasks": {"num_tasks": 10, "num_samples": 40,
                                                                 "correct_rate": 30.0, "valid_rate": 90.0,
                                                                 "intervals": {"correct_rate": [20.0, 40.0]}},
                                                       "kernelbench": {"num_tasks": 70}}}}}}
    made = reference_from_summary(summary, measured="today", machine="one H100", command="c")
    assert made["tables"]["kernelbench"] == REFERENCE["tables"]["kernelbench"]
    assert made["tables"]["builtin"] == [{"stage": "sft", "set": "tasks", "tasks": 10, "samples": 40, "correct %": 30.0,
                                          "95% CI": [20.0, 40.0], "valid %": 90.0}]
    assert "partial" not in made  # a whole evaluation: nothing to say
    # a cut pass: the file says so, and RL minus SFT comes from the problems judged in both
    summary["partial"] = "the evaluation's verification was cut (device time)"
    summary["eval"]["rl_grpo"] = {"metrics": {}, "vs_sft_judged": [
        {"level": 1, "problems": 35, "judged in both": 20, "RL correct %": 28.75, "SFT correct %": 32.5,
         "difference": -3.75, "interval": [-18.75, 10.0], "above_zero": False}]}
    made = reference_from_summary(summary, measured="today", machine="two H200s", command="c")
    assert made["partial"] == summary["partial"]
    assert made["tables"]["vs_sft"] == [{"stage": "rl_grpo", "set": "kernelbench L1: 20 of 35 problems judged in both",
                                         "correct minus SFT (points)": -3.75, "95% CI": [-18.75, 10.0],
                                         "above zero": False}]
