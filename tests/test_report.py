"""The results report, built from a run folder written the way the stages write theirs."""

from __future__ import annotations

import base64
import html
import json
import re

import pytest

from tritonrl_lib.report import charts as C
from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.record import EvalSampling, build_record, write_record
from tritonrl_lib.model.load import MARKER
from tritonrl_lib.report.build import PUBLISHED, build_report, parse_table, timings_table
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.reward import compute_reward
from tritonrl_lib.verify.verdict import Verdict


def v(stage: str, correct: bool = False, speedup: float | None = None, reason: str = "mismatch:seed") -> Verdict:
    return Verdict(stage=stage, correct=correct, speedup=speedup, reason="ok" if correct else reason,
                   reward=compute_reward(stage, (), speedup))


TASKS = [Task(id=f"builtin/L{lvl}/op{i}", level=lvl, name=f"op{i}", source=f"# {lvl}{i}") for lvl, i in
         ((1, 0), (1, 1), (2, 2))]


def write_eval(paths, stage: str, verdicts: list[Verdict], k: int = 2) -> dict:
    completions = [[f"{stage} {t.id} {j}" for j in range(k)] for t in TASKS]
    rec = build_record(model_stage=stage, model_path=f"checkpoints/{stage}", tasks=TASKS, completions=completions,
                       verdicts=verdicts, sampling=EvalSampling(k, 0.8, 0.95, 64, 8, 0), task_source="heldout",
                       device="1x NVIDIA H100 80GB HBM3", wall_s=30.0)
    write_record(paths.eval_file(stage), rec)
    return rec


def jsonl(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def cfg(run_dir):
    return load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "rep"})


def full_run(cfg):
    paths = cfg.paths.ensure()
    write_eval(paths, "base", [v("none", reason="no_code")] * 4 + [v("static", reason="compile_error")] * 2)
    write_eval(paths, "sft", [v("timing", True, 1.4), v("compile"), v("timing", True, 0.8), v("tiny", reason="mismatch:tiny"),
                              v("static", reason="compile_error"), v("none", reason="no_code")])
    write_eval(paths, "rl", [v("timing", True, 2.6), v("timing", True, 1.1), v("timing", True, 0.9), v("compile"),
                             v("timing", True, 1.3), v("extract", reason="static:no_kernel")])
    jsonl(paths.sft_log, [{"step": s, "loss": 1.0 / s, "learning_rate": 1e-4, "session": 1} for s in range(1, 6)])
    with paths.sft_log.open("a") as f:
        f.write('{"step": 6, "loss"')  # torn last line of a killed writer
    jsonl(paths.rl_log, [{"method": "best_of_n", "round": r, "mean_reward": 0.3 + 0.1 * r, "correct_rate": 0.2 * r,
                          "by_level": {"1": {"correct_rate": 0.3 * r}, "2": {"correct_rate": 0.1 * r}},
                          "by_task": {f"t{r}": [1, 4], "t0": [r, 4]}}
                         for r in range(3)])
    jsonl(paths.curriculum_log, [{"step": s, "p_level2": 0.1 if s < 2 else 0.3, "running_l1_rate": 0.2 * s,
                                  "triggered_at": 1 if s >= 1 else None} for s in range(4)])
    paths.timings.write_text(json.dumps({
        "01_data": {"wall_s": 60.0, "device": "1x NVIDIA H100 80GB HBM3", "finished": "x"},
        "02_sft": {"wall_s": 300.0, "device": "1x NVIDIA H100 80GB HBM3", "finished": "x"},
        "03_rl": {"wall_s": 540.0, "device": "1x NVIDIA H100 80GB HBM3", "finished": "x"}}))
    paths.rl_best.parent.mkdir(parents=True, exist_ok=True)
    paths.rl_best.write_text(json.dumps({"method": "best_of_n", "policy": "round-001", "metric": "mean_reward",
                                         "value": 0.5}))
    return paths


def test_full_report_has_every_section(cfg):
    paths = full_run(cfg)
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    assert report.html_path == paths.report_html
    # the metrics table, with numbers, one row per stage and level
    rows = parse_table(page, "metrics")
    assert [(r["model"], r["level"]) for r in rows] == [(s, l) for s in ("base", "sft", "rl") for l in ("all", "L1", "L2")]
    rl_all = rows[6]
    assert float(rl_all["correct %"]) == pytest.approx(66.67)  # 4 of 6
    assert float(rl_all["fast_1 %"]) == pytest.approx(50.0)  # 2.6, 1.1, 1.3
    assert float(rl_all["geomean speedup"]) == pytest.approx((2.6 * 1.1 * 0.9 * 1.3) ** 0.25, abs=0.01)
    assert rows[0]["correct %"] == "0.00"
    # every chart, on disk and embedded in the page
    # a CPU demonstration also draws the kept GPU run's figures ("reference"), labelled as another run's
    assert report.demonstration and "reference" in report.charts
    assert set(report.charts) - {"reference"} == {"funnel", "sft_loss", "rl_curves", "curriculum", "speedup",
                                                  "failures", "wall_clock"}
    for path in report.charts.values():
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.parent == paths.charts_dir
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 8 and all(base64.b64decode(b)[:4] == b"\x89PNG" for b in images)
    # published figures beside ours, each labelled as another model on another task set
    comp = parse_table(page, "comparison")
    others = [r for r in comp if "other model" in r["model"]]
    assert len(others) == len(PUBLISHED) == 2
    tritonrl = next(r for r in others if r["model"].startswith("TritonRL"))
    assert (tritonrl["L1 correct %"], tritonrl["L2 correct %"]) == ("63.00", "7.00")
    assert "other task set" in tritonrl["tasks"] and "arXiv" in tritonrl["source"]
    kernelllm = next(r for r in others if r["model"].startswith("KernelLLM"))
    assert kernelllm["L1 pass@1 %"] == "20.20" and kernelllm["L1 correct %"] == "n/a"
    assert "Not a like-for-like comparison" in page
    # cost: per notebook and a total with GPU-hours = 900 s x 1 GPU
    timing = parse_table(page, "timings")
    assert timing[-1]["notebook"] == "total" and float(timing[-1]["GPU-hours"]) == pytest.approx(0.25)
    # and the source's setup at 7B: the stand-in benchmark's GPU-hours on one GPU and on eight
    scale = parse_table(page, "scale_cost")
    assert {r["GPUs"] for r in scale} == {"1", "8"} and all(float(r["published GPU-hours"]) == 64 for r in scale)
    # and RL's step measured on 1, 2 and 4 GPUs of one host
    multi = parse_table(page, "multi_gpu_rl")
    assert {"1", "2", "4"} <= {r["GPUs"] for r in multi} and "speedup vs 1 GPU" in multi[0]
    assert "random-weight stand-in" in page
    # failure reasons, best policy, headline
    assert any(r["reason"] == "no_code" for r in parse_table(page, "failures"))
    assert "round-001, mean reward 0.500" in page
    assert any(line.startswith("rl: correct 66.7%") for line in report.headline)
    assert "SFT loss 1.000 -> 0.200 over 5 logged steps." in report.headline
    # task t0 drawn every round: 0 of 4, then 2 of 4 in the last
    assert any(line.startswith("Tasks drawn again: 1 in the last round that drew any, correct 50.0% there "
                               "against 0.0% at their first draw") for line in report.headline), report.headline
    assert not report.missing and not report.stale and not report.no_chart
    assert "<script" not in page and "def " not in page  # no code in the page
    frames = report.frames()
    assert frames["metrics"].shape[0] == 9


def test_report_of_a_run_with_only_a_base_eval_says_what_is_missing(cfg):
    paths = cfg.paths.ensure()
    write_eval(paths, "base", [v("none", reason="no_code")] * 5 + [v("full", True)])
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    assert [r["model"] for r in parse_table(page, "metrics")] == ["base"] * 3
    text = "\n".join(report.missing)
    assert "sft: no trained model" in text and "run 02_sft" in text
    assert "rl: no trained model" in text and "run 03_rl" in text
    assert "no log at" in text
    assert set(report.charts) - {"reference"} == {"funnel"}  # nothing to draw the rest from; the page says why
    assert "timing runs only on a GPU" in report.no_chart["speedup"]
    assert "one reason" in report.no_chart["failures"] and "no_code" in report.no_chart["failures"]
    for name in ("sft_loss", "rl_curves", "curriculum", "speedup", "failures", "wall_clock"):
        assert report.no_chart[name] in html.unescape(page.replace("<code>", "`").replace("</code>", "`"))
    assert "Not in this report yet" in page
    # the base sample was correct on a CPU: speed is n/a, not zero
    base = parse_table(page, "metrics")[0]
    assert base["fast_1 %"] == "n/a" and float(base["correct %"]) == pytest.approx(16.67)


def test_a_run_with_nothing_correct_says_so_instead_of_blaming_the_device(cfg):
    paths = cfg.paths.ensure()
    write_eval(paths, "base", [v("none", reason="no_code")] * 6)
    report = build_report(cfg, paths)
    why = report.no_chart["speedup"]
    assert "no sample was correct" in why and "only on a GPU" not in why
    # all bars zero: no funnel drawn as if it were data, a sentence instead
    assert "funnel" not in report.charts and "every bar" in report.no_chart["funnel"]
    assert not paths.chart("report_funnel").exists()


def test_report_with_a_trained_but_unevaluated_stage_points_at_04_eval(cfg):
    paths = cfg.paths.ensure()
    sft = paths.checkpoint("sft")
    sft.mkdir(parents=True)
    (sft / "adapter_config.json").write_text("{}")
    (sft / MARKER).write_text(json.dumps({"base_model": "tiny"}))
    report = build_report(cfg, paths)
    assert any(m.startswith("sft: no evaluation") and "04_eval" in m for m in report.missing)


def test_empty_run_still_renders(cfg):
    report = build_report(cfg, cfg.paths.ensure())
    page = report.html_path.read_text()
    assert "No results yet" in page and set(report.charts) <= {"reference"}  # only the kept run's figures
    assert parse_table(page, "metrics") == []


def test_scale_cost_reads_the_stand_in_benchmark_and_skips_what_is_not_there(tmp_path):
    from tritonrl_lib.report.build import scale_cost_table

    results = {"phases": {}, "cost": {"rows": [
        {"case": "bf16", "gpus": 1, "sft_s": 3600, "rl_s": 7200, "eval_s": 360, "wall_hours": 3.1, "gpu_hours": 3.1,
         "source_gpu_hours": 64.0},
        {"case": "bf16", "gpus": 8, "sft_s": 450, "rl_s": 7000, "eval_s": 300, "wall_hours": 2.15, "gpu_hours": 17.2,
         "source_gpu_hours": 64.0}]}}
    f = tmp_path / "results.json"
    f.write_text(json.dumps(results))
    rows = scale_cost_table(f)
    assert [(r["gpus"], r["sft_h"], r["rl_h"], r["gpu_hours"]) for r in rows] == [(1, 1.0, 2.0, 3.1), (8, 0.12, 1.94, 17.2)]
    assert scale_cost_table(tmp_path / "absent.json") == []
    f.write_text(json.dumps({"phases": {}, "cost": {"error": "could not compute"}}))
    assert scale_cost_table(f) == []
    f.write_text("{not json")
    assert scale_cost_table(f) == []


def test_multi_gpu_rl_reads_the_kept_records_and_skips_what_is_not_there(tmp_path):
    from tritonrl_lib.report.build import multi_gpu_table

    kept = multi_gpu_table()  # docs/benchmarks/rl_multi_gpu_*.json: measured on four H200s
    standin = [r for r in kept if r["model"].startswith("standin") and r["method"] == "best_of_n"]
    assert sorted(r["gpus"] for r in standin) == [1, 2, 4]
    assert next(r for r in standin if r["gpus"] == 4)["speedup"] == pytest.approx(1.22)
    assert all("H200" in r["machine"] for r in kept)
    good = {"machine": "2x GPU", "table": [
        {"model": "m", "method": "grpo", "gpus": 1, "generate_s": 10.04, "verify_s": 5, "wait_s": 1, "train_s": 2,
         "step_s": 13.0, "speedup": 1.0},
        {"model": "m", "method": "grpo", "gpus": 2, "step_s": None}]}  # a run that failed: no step, left out
    f, bad = tmp_path / "rl_multi_gpu_a.json", tmp_path / "rl_multi_gpu_b.json"
    f.write_text(json.dumps(good))
    bad.write_text("{not json")
    rows = multi_gpu_table([f, bad, tmp_path / "absent.json"])
    assert [(r["gpus"], r["generate_s"], r["step_s"], r["machine"]) for r in rows] == [(1, 10.0, 13.0, "2x GPU")]
    assert multi_gpu_table([]) == []


def test_gpu_hours_scale_with_gpu_count():
    rows = timings_table({"02_sft": {"wall_s": 1800, "device": "8x NVIDIA H200"},
                          "01_data": {"wall_s": 60, "device": "cpu (2 cores)"}})
    assert [r["gpu_hours"] for r in rows] == [0.0, 4.0, 4.0]
    assert rows[-1]["wall_s"] == 1860


def test_charts_skip_what_has_no_data():
    for chart in (C.sft_loss_chart([]), C.rl_chart([]), C.curriculum_chart([]), C.timing_chart({}),
                  C.funnel_chart({}), C.difficulty_chart({1: 0, 2: 0, 3: 0})):
        assert isinstance(chart, C.NoChart) and chart.reason
    cpu = build_record(model_stage="base", model_path="m", tasks=TASKS[:1], completions=[["x"]], verdicts=[v("full", True)],
                       sampling=EvalSampling(1, 0.0, 1.0, 8, 1, 0), task_source="builtin")
    assert "only on a GPU" in C.speedup_chart({"base": cpu}).reason  # correct but untimed
    # one point is not a curve
    one = C.rl_chart([{"method": "best_of_n", "round": 0, "mean_reward": 0.0, "correct_rate": 0.0}])
    assert isinstance(one, C.NoChart) and "one best-of-N round" in one.reason
    assert isinstance(C.sft_loss_chart([{"step": 1, "loss": 2.0}]), C.NoChart)
    assert isinstance(C.sft_loss_chart([{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}]), C.Figure)
