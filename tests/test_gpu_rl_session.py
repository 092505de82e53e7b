"""benchmarks/gpu_rl_session.py on the smoke profile: every stage runs, a second call resumes
(nothing done twice), and the summary reports each stage's time, RL's per-step split and the
evaluation of both held-out sets with RL minus SFT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_rl_session.py"


def session(results: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), str(results), "--profile", "smoke", "-p", "n_sft_examples=8",
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_session_resumes_and_summarises(tmp_path):
    results, exported = tmp_path / "s", tmp_path / "out"
    first = session(results, "--only", "data,sft")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = session(results, "--export", str(exported), "--export-sft")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    log = [json.loads(line) for line in (results / "session_log.jsonl").read_text().splitlines()]
    assert [(r["call"], r["stage"], r["status"]) for r in log] == [
        (1, "data", "done"), (1, "sft", "done"), (2, "data", "done"), (2, "sft", "done"),
        (2, "best_of_n", "done"), (2, "grpo", "done"), (2, "eval", "done")]
    assert log[2]["result"]["skipped"] and log[3]["result"]["status"] == "already_done"  # resumed, not redone
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary["eval"]) == {"sft", "rl_best_of_n", "rl_grpo"}
    for stage in ("rl_best_of_n", "rl_grpo"):
        d = summary["eval"][stage]["vs_sft"]
        assert set(d["by_set"]) == {"tasks", "families"} and d["all"]["correct_rate"]["interval"] is not None
    assert len(summary["rl"]["grpo"]["rows"]) == 2 and summary["rl"]["grpo"]["rows"][0]["generate_s"] > 0
    assert "RL minus SFT" in (results / "summary.md").read_text()
    again = summary["rl"]["grpo"]["tasks_drawn_again"]
    assert len(again) == 2 and again[0] is None  # nothing drawn before the first step
    assert "tasks drawn again, per step" in (results / "summary.md").read_text()
    assert (exported / "summary.md").is_file() and (exported / "eval" / "comparison.json").is_file()
    assert not list(exported.rglob("*.safetensors"))

    # the SFT adapter travels on its own: a later session with the same data starts at RL
    import shutil
    import tarfile

    with tarfile.open(exported / "sft_adapter.tgz") as tar:
        names = tar.getnames()
    assert "sft/adapter_model.safetensors" in names and not any("checkpoint-" in n for n in names)
    later = tmp_path / "later"
    shutil.copytree(results / "runs" / "base" / "data", later / "runs" / "base" / "data")
    with tarfile.open(exported / "sft_adapter.tgz") as tar:
        tar.extractall(later / "runs" / "base" / "checkpoints", filter="data")
    third = session(later, "--only", "data,sft")
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    relog = [json.loads(line) for line in (later / "session_log.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["result"].get("status", r["result"].get("skipped"))) for r in relog] == \
        [("data", True), ("sft", "already_done")]


@pytest.mark.slow
def test_select_trains_the_variants_and_keeps_the_best_on_the_development_set(tmp_path):
    results = tmp_path / "s"
    run = session(results, "--only", "data,select,sft", "--variants", "lora_r=4,epochs=1;lora_r=8,epochs=1",
                  "--dev-k", "1")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    chosen = json.loads((results / "chosen_sft.json").read_text())
    assert chosen["variants"] == [{"lora_r": 4, "epochs": 1}, {"lora_r": 8, "epochs": 1}]
    assert chosen["overrides"] == chosen["variants"][chosen["variant"]] and len(chosen["scores"]) == 2
    for i in range(2):  # each variant evaluated on every task of the development set
        rec = json.loads((results / "eval" / f"dev_sft_v{i}.json").read_text())
        assert rec["task_source"] == "devset" and rec["num_tasks"] >= 48
    log = [json.loads(line) for line in (results / "session_log.jsonl").read_text().splitlines()]
    sft = next(r for r in log if r["stage"] == "sft")
    assert sft["result"]["status"] == "already_done"  # the chosen variant's adapter is the run's SFT
    marker = json.loads((results / "runs" / "base" / "checkpoints" / "sft" / "tritonrl_model.json").read_text())
    assert marker["fingerprint"]["model"]["lora_r"] == chosen["overrides"]["lora_r"]
    summary = json.loads((results / "summary.json").read_text())
    assert [r["SFT variant"].endswith("(chosen)") for r in summary["dev_set"]].count(True) == 1



@pytest.mark.slow
def test_sigterm_stops_a_stage_as_ctrl_c_does(tmp_path):
    """`timeout` or a scheduler sends SIGTERM: the stage is recorded as interrupted and the session exits 130
    (its finally blocks ran: the verifier pool closed, what was kept stays), not killed mid-write."""
    import signal

    results = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(results), "--profile", "smoke", "-p",
                             "n_sft_examples=8", "--only", "data"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "stage data" in line:  # the stage has begun: its data generation takes far longer than this
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.communicate(timeout=300)[0]
    assert proc.returncode == 130, "".join(seen) + rest
    log = [json.loads(line) for line in (results / "session_log.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["status"]) for r in log] == [("data", "interrupted")]
    assert "interrupted: the next call resumes here" in rest


def _kb_rows(stage: str, outcomes: dict[str, list]) -> dict:
    """An eval record's rows: per problem id, its samples' outcomes (True right, False wrong, None never judged)."""
    rows = []
    for pid, samples in outcomes.items():
        for j, ok in enumerate(samples):
            rows.append({"id": pid, "level": int(pid.split("/")[1][1]), "sample": j, "model_stage": stage,
                         "heldout_set": "kernelbench", "correct": bool(ok),
                         "error": "not verified: the evaluation was cut off before this sample" if ok is None else ""})
    return {"detailed_results": rows, "metrics": {}}


def test_a_cut_evaluation_is_read_from_its_partial_record_and_compared_where_both_were_judged(tmp_path):
    """summarize reads eval_<stage>.partial.json where no whole record exists, and RL minus SFT then counts
    only problems whose every sample was judged in both: a problem RL never reached is left out, not
    counted as RL's loss."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import compare_cut_evals as G

    sft = _kb_rows("sft", {"kernelbench/L1/a": [True, True], "kernelbench/L1/b": [True, False],
                           "kernelbench/L1/c": [True, True], "kernelbench/L2/d": [False, False]})
    rl = _kb_rows("rl_grpo", {"kernelbench/L1/a": [True, False], "kernelbench/L1/b": [True, True],
                              "kernelbench/L1/c": [None, None], "kernelbench/L2/d": [False, None]})
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval_sft.json").write_text(json.dumps(sft))
    (tmp_path / "eval" / "eval_rl_grpo.partial.json").write_text(json.dumps(rl))
    assert G.eval_record(tmp_path, "sft") == (sft, False)
    assert G.eval_record(tmp_path, "rl_grpo") == (rl, True)
    assert G.eval_record(tmp_path, "rl_best_of_n") == (None, False)
    l1, l2 = G.judged_vs_sft(rl, sft, resamples=200)
    assert (l1["level"], l1["problems"], l1["judged in both"]) == (1, 3, 2)  # c left out: RL never judged it
    assert (l1["RL correct %"], l1["SFT correct %"], l1["difference"]) == (75.0, 75.0, 0.0)
    assert l2["judged in both"] == 0 and l2["difference"] is None


def _with_rows_for_the_report(rec: dict) -> dict:
    for r in rec["detailed_results"]:
        r.update(stage="static" if r["error"] else ("timing" if r["correct"] else "compile"), speedup=None, reason="")
    return rec


def test_the_summary_labels_a_cut_pass_and_compares_rl_where_both_were_judged(tmp_path):
    """`--only summary` over a session whose RL evaluation was cut: its rows say lower bound, the summary
    says what was cut, and RL minus SFT is the judged-in-both comparison; a partial record whose every
    sample was judged is not called cut."""
    sft = _with_rows_for_the_report(_kb_rows("sft", {"kernelbench/L1/a": [True, True], "kernelbench/L1/c": [True, True]}))
    rl = _with_rows_for_the_report(_kb_rows("rl_grpo", {"kernelbench/L1/a": [True, False],
                                                        "kernelbench/L1/c": [None, None]}))
    whole = _with_rows_for_the_report(_kb_rows("rl_best_of_n", {"kernelbench/L1/a": [True, True],
                                                                "kernelbench/L1/c": [True, False]}))
    results = tmp_path / "s"
    (results / "eval").mkdir(parents=True)
    for name, rec in (("eval_sft.json", sft), ("eval_rl_grpo.partial.json", rl),
                      ("eval_rl_best_of_n.partial.json", whole)):
        (results / "eval" / name).write_text(json.dumps(rec))
    done = session(results, "--only", "summary")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["eval"]["rl_grpo"]["unverified"] == 2 and "unverified" not in summary["eval"]["rl_best_of_n"]
    assert summary["partial"].startswith("the evaluation's verification was cut (device time): 2 of 4 samples of rl_grpo")
    assert [r["stage"] for r in summary["kernelbench"]["headline"]] == [
        "sft", "rl_best_of_n", "rl_grpo (lower bound: 2 unverified)"]
    (judged,) = summary["eval"]["rl_grpo"]["vs_sft_judged"]
    assert (judged["judged in both"], judged["RL correct %"], judged["SFT correct %"]) == (1, 50.0, 100.0)
    assert "vs_sft_judged" not in summary["eval"]["rl_best_of_n"]  # neither side cut: nothing to take apart
    assert "where both were judged" in (results / "summary.md").read_text()
