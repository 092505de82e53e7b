"""benchmarks/qwen7b_standin.py, the GPU measurement of the qwen7b profile on a 7B stand-in, run
here on the CPU with the tiny Qwen2 stand-in so that every phase's code has run before the GPU
sees it; its resume and budget rules; the out-of-memory record; and the cost arithmetic."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "qwen7b_standin.py"
sys.path.insert(0, str(REPO / "benchmarks"))

pytestmark = pytest.mark.timeout(1500)


def run(work: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), "--work", str(work), "--out", str(work / "out"), "--quick", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1400)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("q7")
    proc = run(work, "--budget-s", "1300")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc


def _results(work: Path) -> dict:
    return json.loads((work / "out" / "results.json").read_text())


@pytest.mark.slow
def test_every_phase_runs_on_the_cpu_and_8bit_says_what_it_needs(quick_run):
    work, proc = quick_run
    phases = _results(work)["phases"]
    status = {k: v["status"] for k, v in phases.items()}
    assert status == {"env": "ok", "build": "ok", "data": "ok", "sft_bf16": "ok", "rollout": "ok", "grpo": "ok",
                      "sft_8bit": "skipped", "generate_8bit": "skipped", "best_of_n": "ok", "grpo_profile": "ok",
                      "eval": "ok"}, {k: v.get("error") for k, v in phases.items()}
    for name in ("sft_8bit", "generate_8bit"):  # the library's message, and what to carry to the GPU machine
        err = phases[name]["error"]
        assert "need a CUDA GPU" in err and "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl" in err
    r = {k: v["result"] for k, v in phases.items() if v["status"] == "ok"}
    assert r["build"]["check"]["ok"] and r["build"]["peak_rss_of_build_process_mb"] > 0
    assert r["sft_bf16"]["steps"] == 3 and r["sft_bf16"]["tokens_per_s_steady"] > 0
    assert r["sft_bf16"]["gradient_checkpointing"] is True  # the profile's setting reached the trainer
    roll = r["rollout"]
    assert roll["lean"]["engine"] == "lean" and roll["generate"]["engine"] == "hf"
    assert roll["lean"]["sequences"] == 2 * 2 and roll["lean"]["generated_tokens"] == 4 * 12  # to the limit
    assert roll["lean_one_batch"]["batch_size"] == 4 and roll["generate"]["sequences"] == 4
    g = r["grpo"]
    assert g["step_s"] >= g["generate_s"] + g["verify_s"] and g["train_s"] > 0
    assert g["ran_in_workers"] == 2 and g["verify_per_min_of_those_run"] > 0  # the injected references ran
    assert g["start"].startswith("the sft_bf16 adapter")
    assert r["grpo_profile"]["max_new_tokens"] == 16 and r["grpo_profile"]["tasks"] == 1
    assert r["best_of_n"]["kept"] == 1 and r["best_of_n"]["train"]["steps"] >= 1
    ev = r["eval"]
    assert ev["labelled"] and ev["model_path"].endswith(".random-weights-standin")
    record = json.loads((work / "out" / "eval_base.json").read_text())
    assert record["model_path"] == ev["model_path"] and record["num_tasks"] == 2
    summary = (work / "out" / "summary.md").read_text()
    assert summary.startswith("# qwen7b on a random-weight stand-in (tests/qwen2-tiny): RANDOM WEIGHTS")
    assert "| bf16 base, lean rollout | 8 |" in summary and "GPU-hours" in summary
    assert "[sft_8bit] skipped" in proc.stdout
    assert sorted(p.name for p in (work / "out").iterdir()) == ["eval_base.json", "logs.tar.gz", "results.json",
                                                                  "summary.md"]


@pytest.mark.slow
def test_a_second_run_keeps_finished_phases_and_retries_skipped_ones(quick_run):
    work, _ = quick_run
    proc = run(work, "--phases", "env,sft_bf16,sft_8bit", "--budget-s", "600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[env] ok earlier; kept" in proc.stdout and "[sft_bf16] ok earlier; kept" in proc.stdout
    assert "[sft_8bit] starting" in proc.stdout and "[sft_8bit] skipped" in proc.stdout
    none = run(work, "--phases", "sft_8bit", "--budget-s", "0")  # no budget: nothing starts, it says so
    assert "not started for lack of budget: sft_8bit. Run the same command again" in none.stdout


def test_a_phase_out_of_memory_is_recorded_with_the_setting_to_change(tmp_path, monkeypatch):
    import torch

    standin_bench = importlib.import_module("qwen7b_standin")
    phases = importlib.import_module("qwen7b_phases")
    from tritonrl_lib.model import load as models

    argv = ["--work", str(tmp_path), "--out", str(tmp_path / "out"), "--quick"]
    ctx = phases.Ctx(standin_bench.parse_args(argv), argv)

    def rollout_that_does_not_fit(ctx):
        with models.explain_oom("rollout", ctx.config("rollout")):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")

    monkeypatch.setattr(phases, "phase_rollout", rollout_that_does_not_fit)
    standin_bench.run_phase_here(ctx, "rollout")
    rec = json.loads((tmp_path / "results" / "rollout.json").read_text())
    assert rec["status"] == "failed" and rec["out_of_memory"] is True
    assert "rollout_batch_size (now 4)" in rec["error"] and "max_new_tokens (now 16)" in rec["error"]


def test_cost_arithmetic_from_known_rates():
    from qwen7b_cost import Rates, Workload, cost_table, estimate

    w = Workload(sft_examples=1000, sft_epochs=1.0, sft_tokens_per_example=1000.0, rl_method="best_of_n", rounds=3,
                 grpo_steps=20, tasks_per_round=16, n_samples=10, top_k=3, prompt_tokens=500.0,
                 completion_tokens=1000.0, eval_samples=60)
    r = Rates(sft_tokens_per_s=1000.0, rollout_tokens_per_s=10000.0, verify_per_min=80.0)
    one = estimate(w, r, gpus=1)
    # SFT 1,000 s; a round: generate 160 x 1,000 / 10,000 = 16 s, verify 160 / 80 per min = 120 s,
    # fine-tune 48 kept x 1,500 tokens / 1,000 = 72 s; eval 60 x 1,000 / 10,000 + 60 / 80 per min = 51 s
    assert (one["sft_s"], one["rl_s"], one["eval_s"]) == (1000.0, 624.0, 51.0)
    assert one["gpu_hours"] == round(1675 / 3600, 3) == one["wall_hours"]
    eight = estimate(w, r, gpus=8)
    # SFT over 8 GPUs, verification over 8 GPUs' workers; generation and fine-tune on one
    assert (eight["sft_s"], eight["rl_s"]) == (125.0, 309.0) and eight["eval_s"] == pytest.approx(11.6)
    assert eight["gpu_hours"] == round((125 + 309 + 11.625) * 8 / 3600, 3)
    grpo = Workload(**{**w.__dict__, "rl_method": "grpo"})
    with pytest.raises(ValueError, match="grpo_train_s_per_token"):
        estimate(grpo, r)
    g = estimate(grpo, Rates(**{**r.__dict__, "grpo_train_s_per_token": 1e-4}))
    assert g["rl_s"] == pytest.approx(20 * (16 + 120 + 160 * 1500 * 1e-4))
    rows, table = cost_table({"case": (w, r)})
    assert [row["gpus"] for row in rows] == [1, 8] and "| case | 1 |" in table and "| 64 |" in table


def test_cost_follows_the_qwen7b_profile():
    from qwen7b_cost import Workload

    from tritonrl_lib.core.config import load_config

    w = Workload.from_config(load_config("qwen7b"), prompt_tokens=600)
    assert (w.sft_examples, w.sft_epochs, w.rounds, w.tasks_per_round, w.n_samples, w.top_k) == (1000, 1.0, 3, 16, 10, 3)
    assert w.completion_tokens == 1536 and w.eval_samples == 3 * 20 * 1 and w.rl_method == "best_of_n"
