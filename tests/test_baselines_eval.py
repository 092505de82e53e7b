"""Speedups over this machine's stored baselines in the eval record and the report, from a baselines file
written here (times chosen by hand) and verdicts as the verifier writes them (no GPU needed)."""

from __future__ import annotations

import pytest

from tritonrl_lib.eval import baselines as B
from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.eval.record import EvalSampling, build_record, eval_sampling, fingerprint, read_record, write_record
from tritonrl_lib.eval.run import evaluate_model, find_baselines
from tritonrl_lib.report.build import build_report, parse_table
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.reward import compute_reward
from tritonrl_lib.verify.verdict import Verdict

TASKS = [Task(id=f"kernelbench/L{lvl}/{i}_Op", level=lvl, name=f"{i}_Op", source=f"# task {i}\n")
         for lvl, i in ((1, 1), (1, 2), (2, 3))]


def timed(kernel_ms: float, ref_ms: float) -> Verdict:
    """A correct sample as the verifier times it: its kernel's time and the paired reference's."""
    return Verdict(stage="timing", correct=True, reason="ok", kernel_time_ms=kernel_ms, ref_time_ms=ref_ms,
                   speedup=ref_ms / kernel_ms, reward=compute_reward("timing", (), ref_ms / kernel_ms))


WRONG = Verdict(stage="tiny", correct=False, reason="mismatch:tiny", reward=compute_reward("tiny", (), None))
# task 1: kernels of 1.0 and 4.0 ms; task 2: 2.0 ms and a wrong one; task 3 (L2): 0.5 ms and a wrong one
VERDICTS = [timed(1.0, 2.0), timed(4.0, 2.0), timed(2.0, 2.2), WRONG, timed(0.5, 1.5), WRONG]
# stored times: eager and compile for tasks 1 and 3; task 2's compile failed (out of memory)
STORED = {"1_Op": {"eager": 2.0, "compile": 1.5}, "2_Op": {"eager": 2.4, "compile": None},
          "3_Op": {"eager": 1.6, "compile": 0.4}}


def record(k: int = 2) -> dict:
    return build_record(model_stage="rl", model_path="checkpoints/rl", tasks=TASKS,
                        completions=[[f"{t.id} {j}" for j in range(k)] for t in TASKS], verdicts=VERDICTS,
                        sampling=EvalSampling(k, 0.2, 0.95, 64, 8, 0), task_source="kernelbench",
                        device="1x NVIDIA H100 80GB HBM3")


def write_baselines(folder, machine=None, tasks=TASKS):
    store = B.BaselineFile(folder / B.file_name(machine or B.machine_identity("cpu")),
                           machine or B.machine_identity("cpu"))
    for t in tasks:
        times = STORED[t.name]
        store.record(t, {m: ({"ms": ms} if ms else {"error": "CUDA out of memory", "reason": "oom"})
                         for m, ms in times.items()}, {"warmup": 10, "trials": 50, "trim": 0.1}, 1.0)
    store.save()
    return store


@pytest.fixture
def cfg(run_dir):
    return load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "bl", "bootstrap_resamples": 0})


def test_correct_timed_samples_get_speedups_over_both_baselines(cfg, run_dir):
    write_baselines(B.default_dir(run_dir))
    store, note = find_baselines(cfg, "cpu")
    assert store is not None and note is None
    rec = record()
    assert B.attach_to_record(rec, TASKS, store, note)
    rows = rec["detailed_results"]
    assert [r["speedup_vs_eager_baseline"] for r in rows] == pytest.approx([2.0, 0.5, 1.2, None, 3.2, None])
    assert [r["speedup_vs_compile"] for r in rows] == [1.5, 0.375, None, None, 0.8, None]
    assert [r["baseline_compile_ms"] for r in rows] == [1.5, 1.5, None, None, 0.4, 0.4]
    m = rec["metrics"]
    # vs torch.compile: tasks 1 and 3 only (4 samples, 3 correct: 1.5x, 0.375x, 0.8x)
    vc = m["vs_compile"]
    assert vc["fast_p"] == {"0": 75.0, "1.0": 25.0, "1.5": 0.0, "2.0": 0.0}
    assert (vc["num_samples"], vc["num_tasks"], vc["num_tasks_without"]) == (4, 2, 1)
    assert vc["geomean_speedup"] == pytest.approx((1.5 * 0.375 * 0.8) ** (1 / 3), abs=1e-4)
    # vs the stored eager times: all 6 samples, 4 correct: 2.0, 0.5, 1.2, 3.2
    ve = m["vs_eager_baseline"]
    assert ve["fast_p"] == {"0": 66.67, "1.0": 50.0, "1.5": 33.33, "2.0": 16.67}
    assert m["by_level"]["2"]["vs_compile"]["fast_p"] == {"0": 50.0, "1.0": 0.0, "1.5": 0.0, "2.0": 0.0}
    # the verifier's own paired timing is still the headline fast_p: 2.0, 0.5, 1.1, 3.0
    assert m["fast_p"] == {"0": 66.67, "1.0": 50.0, "1.5": 33.33, "2.0": 16.67}
    assert rec["baselines"]["file"] == str(store.path) and rec["baselines"]["machine"]["device"] == "cpu"
    assert rec["baselines"]["tasks_with_compile"] == 2 and rec["baselines"]["tasks_without_compile"] == [TASKS[1].id]
    assert any("1 task(s) have no torch.compile time" in n and "leaves out the 1 of them with a correct sample" in n
               for n in rec["notes"])
    assert not B.attach_to_record(rec, TASKS, store, note)  # nothing new: unchanged


def test_a_changed_task_or_no_file_gives_no_baseline_and_says_why(cfg, run_dir):
    rec = record()
    store, note = find_baselines(cfg, "cpu")  # nothing measured yet
    assert store is None and "tritonrl baselines" in note
    B.attach_to_record(rec, TASKS, store, note)
    assert rec["metrics"]["vs_compile"] is None and rec["metrics"]["vs_eager_baseline"] is None  # never zeros
    assert rec["baselines"] == {"file": None, "note": note} and note in rec["notes"]
    assert "speedup_vs_compile" not in rec["detailed_results"][0]
    # a baselines file measured for an older version of task 1: its entry does not count
    old = [Task(id=TASKS[0].id, level=1, name="1_Op", source="# task 1, as it was\n")] + TASKS[1:]
    write_baselines(B.default_dir(run_dir), tasks=old)
    store, note = find_baselines(cfg, "cpu")
    B.attach_to_record(rec, TASKS, store, note)
    assert rec["detailed_results"][0]["baseline_eager_ms"] is None and rec["baselines"]["tasks_with_eager"] == 2


def test_the_setting_picks_the_file_off_or_fails_plainly(cfg, run_dir, tmp_path):
    other = dict(B.machine_identity("cpu"), name="Another CPU")
    elsewhere = write_baselines(tmp_path / "from_elsewhere", machine=other)
    assert find_baselines(cfg, "cpu")[0] is None  # auto: only the default folder is looked in
    cfg.eval.baselines = str(elsewhere.path)  # a file measured on another machine is not used
    store, note = find_baselines(cfg, "cpu")
    assert store is None and "Another CPU" in note and "not used" in note
    cfg.eval.baselines = "off"
    assert find_baselines(cfg, "cpu")[0] is None and "off" in find_baselines(cfg, "cpu")[1]
    cfg.eval.baselines = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match="no such file or folder"):
        find_baselines(cfg, "cpu")
    mine = write_baselines(tmp_path / "mine")
    cfg.eval.baselines = str(tmp_path / "mine")  # a folder: this machine's file in it
    assert find_baselines(cfg, "cpu")[0].path == mine.path


def test_a_reused_evaluation_gets_baselines_measured_since(cfg, run_dir):
    sampling = eval_sampling(cfg, k=2)
    out = cfg.paths.eval_file("rl")
    rec = record()
    rec["fingerprint"] = fingerprint(model_stage="rl", spec="embedded", tasks=TASKS, sampling=sampling, cfg=cfg,
                                     device="cpu")
    del rec["metrics"]["fast_p"]  # a record written before fast_p existed
    write_record(out, rec)
    write_baselines(B.default_dir(run_dir))
    res = evaluate_model(cfg, "embedded", TASKS, model_stage="rl", out=out, k=2, progress=False, log=lambda s: None)
    assert res.status == "reused"
    on_disk = read_record(out)
    assert on_disk["metrics"]["vs_compile"]["fast_p"]["1.0"] == 25.0 and on_disk["metrics"]["fast_p"]["0"] == 66.67


def test_the_report_shows_fast_p_against_eager_and_torch_compile(cfg, run_dir):
    paths = cfg.paths.ensure()
    store = write_baselines(B.default_dir(run_dir))
    rl = record()
    B.attach_to_record(rl, TASKS, store, None)
    write_record(paths.eval_file("rl"), rl)
    sft = record()
    B.attach_to_record(sft, TASKS, None, "baselines: none for this machine")
    write_record(paths.eval_file("sft"), sft)
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    rows = parse_table(page, "fast_p")
    got = {(r["model"], r["level"], r["against"]): r for r in rows}
    assert float(got[("rl", "all", "torch.compile")]["fast_1.0 %"]) == 25.0
    assert float(got[("rl", "all", "eager (verifier)")]["fast_1.5 %"]) == pytest.approx(33.33)
    assert got[("rl", "L2", "torch.compile")]["fast_0 %"] == "50.00"
    geomean = float(got[("rl", "all", "torch.compile")]["geomean speedup"])
    assert geomean == pytest.approx((1.5 * 0.375 * 0.8) ** (1 / 3), abs=0.005)
    assert ("sft", "all", "torch.compile") not in got and ("sft", "all", "eager (verifier)") in got
    assert "Speed: fast_p" in page and report.tables["fast_p"]
    assert any("against torch.compile faster 25.0%" in line for line in report.headline)


def test_the_report_says_when_torch_compile_was_not_measured(cfg):
    paths = cfg.paths.ensure()
    rec = record()
    B.attach_to_record(rec, TASKS, None, "baselines: none for this machine (x) at /somewhere")
    write_record(paths.eval_file("rl"), rec)
    page = build_report(cfg, paths).html_path.read_text()
    assert "Against torch.compile: not measured for this machine" in page
    assert {r["against"] for r in parse_table(page, "fast_p")} == {"eager (verifier)"}
