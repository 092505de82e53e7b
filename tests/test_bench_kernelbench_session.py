"""benchmarks/kernelbench_session.sh's `watch` on a machine where no plan was started: the device machine is
given back when a call's successor comes late, and the next call lands on a bare one. Watching there must
say so at once, not spend its W seconds printing empty progress (the twelfth session lost its last device
minutes that way)."""

import os
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kernelbench_session.sh"


def _watch(logs: Path, out: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "LOGS": str(logs), "OUT": str(out), "W": "120", **env}
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(SCRIPT), "watch"], env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - t0


def test_watch_on_a_bare_machine_stops_at_once(tmp_path):
    done, took = _watch(tmp_path / "logs", tmp_path / "out")
    assert done.returncode == 3
    assert "no plan was started on this machine" in done.stderr
    assert took < 20  # not the 30 s of a first progress line, let alone W
    assert not (tmp_path / "out" / "res.tgz").exists()  # nothing packed: there is nothing of the run to pack


def _finished_plan(tmp_path: Path) -> Path:
    """A plan over (its logs, in tmp_path/logs, say so) and its session folder R: what `watch` packs at once."""
    logs, run = tmp_path / "logs", tmp_path / "R"
    (run / "eval").mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    logs.mkdir()
    (logs / "root").write_text(str(run))
    (logs / "last").write_text("eval")
    (logs / "plan.log").write_text("00:00:00 end eval rc=0\n")
    (logs / "eval.done").write_text("0\n")
    return run


def test_watch_packs_a_finished_plan_at_once(tmp_path):
    run = _finished_plan(tmp_path)
    (run / "runs" / "baselines").mkdir(parents=True)  # torch.compile times measured there come back too
    (run / "runs" / "baselines" / "cuda_h200.json").write_text("{}")
    (run / "runs" / "base" / "data").mkdir(parents=True)  # the corpus a shipped SFT adapter was trained on
    (run / "runs" / "base" / "data" / "sft_train.jsonl").write_text("{}\n")
    done, took = _watch(tmp_path / "logs", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert took < 20  # a plan already over is packed without waiting for a progress line
    listing = subprocess.run(["tar", "tzf", str(tmp_path / "out" / "res.tgz")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert "summary.json" in listing and "logs/eval.done" in listing and "runs/baselines/cuda_h200.json" in listing
    assert "runs/base/data/sft_train.jsonl" in listing


def test_sfts_adapter_comes_back_once_in_bf16_parts(tmp_path):
    """`ship` (what the one-GPU plan runs after SFT): the adapter's top folder, weights in bf16, no Trainer
    checkpoints, in 15 MB parts that the next pack puts beside res.tgz once; unpacked, it is the adapter."""
    import sys

    import torch
    from safetensors.torch import load_file, save_file

    run = _finished_plan(tmp_path)
    sft = run / "runs" / "base" / "checkpoints" / "sft"
    (sft / "checkpoint-2").mkdir(parents=True)
    weights = {"lora_A": torch.randn(4096, 1024), "lora_B": torch.randn(1024, 4096), "steps": torch.arange(3)}
    save_file(weights, str(sft / "adapter_model.safetensors"))  # 32 MB of float32: three parts
    (sft / "adapter_config.json").write_text('{"r": 64}')
    (sft / "tritonrl_model.json").write_text('{"base_model": "embedded"}')
    (sft / "checkpoint-2" / "optimizer.pt").write_bytes(b"x" * 1000)
    ship = {"SHIP": str(tmp_path / "ship"), "PY": sys.executable}
    subprocess.run(["bash", str(SCRIPT), "ship", str(run)], env={**os.environ, "LOGS": str(tmp_path / "logs"), **ship},
                   capture_output=True, text=True, check=True, timeout=120)
    parts = sorted(p.name for p in (tmp_path / "ship").iterdir())
    assert parts == ["sft.tar.part-aa", "sft.tar.part-ab"]  # bf16 halves it: 16 MB in two parts
    assert not (tmp_path / "ship.tmp").exists()

    outs = []
    for n in (1, 2):  # the first pack takes the parts, the next leaves them
        out = tmp_path / f"out{n}"
        done, _ = _watch(tmp_path / "logs", out, **ship)
        assert done.returncode == 0, done.stderr
        outs.append(sorted(p.name for p in out.iterdir()))
    assert outs == [["res.tgz", *parts], ["res.tgz"]]

    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    tar = b"".join((tmp_path / "out1" / p).read_bytes() for p in parts)
    subprocess.run(["tar", "xf", "-", "-C", str(unpacked)], input=tar, check=True)
    assert sorted(p.name for p in (unpacked / "sft").iterdir()) == \
        ["adapter_config.json", "adapter_model.safetensors", "tritonrl_model.json"]
    back = load_file(str(unpacked / "sft" / "adapter_model.safetensors"))
    assert back["lora_A"].dtype == torch.bfloat16 and back["steps"].dtype == torch.int64
    assert torch.equal(back["lora_B"], weights["lora_B"].to(torch.bfloat16)) and torch.equal(back["steps"], weights["steps"])


def test_the_sft_plan_scores_its_adapter_and_the_named_ones_on_the_development_set_before_kernelbench(tmp_path):
    """`startsft`'s plan: SFT, then the development set (the set SFT's corpus is chosen on) for its adapter and
    each DEV_ALSO one, then the KernelBench evaluation; a failed SFT stops it before any evaluation."""
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n[ -z "$FAIL_SFT" ] || case "$*" in *"--only sft"*) exit 1;; esac\n')
    fake.chmod(0o755)
    logs, run = tmp_path / "logs", tmp_path / "R"
    logs.mkdir()
    env = {**os.environ, "LOGS": str(logs), "PY": str(fake), "P": "n_sft_examples=6000", "SHIP": str(tmp_path / "ship"),
           "DEV_ALSO": "old=/x/old other=/x/other"}
    subprocess.run(["bash", str(SCRIPT), "_evalsft", str(run), "/kb"], env=env, check=True, timeout=60,
                   capture_output=True)
    lines = calls.read_text().splitlines()
    # SFT, its adapter shipped (bf16 through $PY -c), three development-set scores, the KernelBench evaluation
    assert len(lines) == 6, lines
    assert "--only sft" in lines[0] and "-p n_sft_examples=6000" in lines[0]
    assert lines[1].startswith("-c ") and "bfloat16" in lines[1]
    assert f"--model {run}/runs/base/checkpoints/sft --tasks devset --num_tasks 0 --k 2" in lines[2]  # all 50
    assert "--model /x/old --tasks devset" in lines[3] and f"--out {run}/eval/dev_old.json" in lines[3]
    assert "--model /x/other --tasks devset" in lines[4] and f"--out {run}/eval/dev_other.json" in lines[4]
    assert "--only eval --eval-stages sft" in lines[5]
    assert all((logs / f"{n}.done").read_text().strip() == "0" for n in ("sft", "dev_sft", "dev_old", "evalsft"))

    calls.unlink()
    subprocess.run(["bash", str(SCRIPT), "_evalsft", str(run), "/kb"], env={**env, "FAIL_SFT": "1"}, timeout=60,
                   capture_output=True)
    assert len(calls.read_text().splitlines()) == 1  # SFT alone: nothing evaluated after it failed


def test_a_malformed_dev_also_stops_startsft_before_any_plan(tmp_path):
    logs = tmp_path / "logs"
    for bad in ("/x/old", "sft=/x/old", "a b=/x", "old="):
        done = subprocess.run(["bash", str(SCRIPT), "startsft", str(tmp_path / "R"), "/kb"],
                              env={**os.environ, "LOGS": str(logs), "DEV_ALSO": bad}, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and "is not NAME=ADAPTER" in done.stderr, (bad, done.stderr)
        assert not logs.exists()  # nothing started: no logs, no copy of the tree


def _env_without_host_pools() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TRITONRL_HOST_POOLS"}


def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for $PY that records each call with the GPUs it was given, and fails the stage named in
    $FAIL (a `--only` stage's name) when set."""
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "gpus=$CUDA_VISIBLE_DEVICES pools=$TRITONRL_HOST_POOLS $*" >> {calls}\n'
                    '[ -n "$FAIL" ] && case "$*" in *"--only $FAIL "*) exit 1;; esac\nexit 0\n')
    fake.chmod(0o755)
    return fake, calls


def test_the_two_gpu_plan_gives_each_rl_method_a_gpu_and_times_the_solved_problems_while_sft_trains(tmp_path):
    """`start2`'s plan: SFT then best-of-N on the first GPU; the baselines of BASELINES's records (one after
    another) then GRPO on the second; the session's settings (P) and RL's time budget (RL_S) in every stage
    they belong to; SFT's adapter shipped; then the methods that finished evaluated over both GPUs."""
    fake, calls = _fake_python(tmp_path)
    logs, run = tmp_path / "logs", tmp_path / "R"
    logs.mkdir()
    env = {**_env_without_host_pools(), "LOGS": str(logs), "PY": str(fake), "SHIP": str(tmp_path / "ship"),
           "STAGGER_S": "0", "CUDA_VISIBLE_DEVICES": "3,5", "P": "rounds=12 grpo_beta=0.04", "RL_S": "450",
           "BASELINES": "/recs/L2.json /recs/L1.json"}
    subprocess.run(["bash", str(SCRIPT), "_eval2", str(run), "/kb"], env=env, check=True, timeout=60,
                   capture_output=True)
    lines = calls.read_text().splitlines()
    by = {name: [ln for ln in lines if key in ln] for name, key in (
        ("sft", "--only sft"), ("bon", "--only best_of_n"), ("grpo", "--only grpo"), ("eval", "--only eval"),
        ("baselines", "tritonrl_lib.cli baselines"))}
    assert [len(v) for v in by.values()] == [1, 1, 1, 1, 2], lines
    assert by["sft"][0].startswith("gpus=3 pools= ") and "-p rounds=12 -p grpo_beta=0.04" in by["sft"][0]
    assert by["bon"][0].startswith("gpus=3 pools=2 ") and by["grpo"][0].startswith("gpus=5 pools=2 ")
    for rl in (by["bon"][0], by["grpo"][0]):
        assert "-p rounds=12 -p grpo_beta=0.04" in rl and "-p rl_time_budget_s=450" in rl
    assert [ln.split("--solved-in ")[1].split()[0] for ln in by["baselines"]] == ["/recs/L2.json", "/recs/L1.json"]
    assert all(ln.startswith("gpus=5 pools= ") and f"--out {run}/runs/baselines" in ln for ln in by["baselines"])
    assert lines.index(by["baselines"][1]) < lines.index(by["grpo"][0])  # GPU 1 is free before GRPO takes it
    assert by["eval"][0].startswith("gpus=3,5 pools= ") and "--eval-stages sft,rl_best_of_n,rl_grpo" in by["eval"][0]
    assert "-p heldout_sets=[kernelbench]" in by["eval"][0] and "rl_time_budget_s" not in by["eval"][0]
    assert any(" -c " in ln and "bfloat16" in ln for ln in lines)  # the adapter shipped

    calls.unlink()  # a method that failed is not evaluated; the other is
    subprocess.run(["bash", str(SCRIPT), "_eval2", str(run), "/kb"], env={**env, "FAIL": "grpo"}, check=True,
                   timeout=60, capture_output=True)
    evals = [ln for ln in calls.read_text().splitlines() if "--only eval" in ln]
    assert len(evals) == 1 and "--eval-stages sft,rl_best_of_n " in evals[0]


def test_start2_refuses_a_baselines_record_that_is_not_there(tmp_path):
    logs = tmp_path / "logs"
    done = subprocess.run(["bash", str(SCRIPT), "start2", str(tmp_path / "R"), "/kb"],
                          env={**os.environ, "LOGS": str(logs), "BASELINES": str(tmp_path / "missing.json")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "BASELINES: no record at" in done.stderr
    assert not logs.exists()  # nothing started


def test_the_one_gpu_plan_runs_the_methods_named_alone_on_the_whole_host(tmp_path):
    """METHODS=best_of_n: SFT, then best-of-N alone (no host split), then the evaluation; GRPO never starts."""
    fake, calls = _fake_python(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {**_env_without_host_pools(), "LOGS": str(logs), "PY": str(fake), "SHIP": str(tmp_path / "ship"),
           "STAGGER_S": "0", "METHODS": "best_of_n", "RL_S": "400"}
    subprocess.run(["bash", str(SCRIPT), "_eval", str(tmp_path / "R"), "/kb"], env=env, check=True, timeout=60,
                   capture_output=True)
    stages = [ln.split("--only ")[1].split()[0] for ln in calls.read_text().splitlines() if "--only " in ln]
    assert stages == ["sft", "best_of_n", "eval"]
    bon = next(ln for ln in calls.read_text().splitlines() if "--only best_of_n" in ln)
    assert "-p rl_time_budget_s=400" in bon and "pools= " in bon  # the host not split: one pool on it
    assert not (logs / "grpo.done").exists()
    evals = [ln for ln in calls.read_text().splitlines() if "--only eval" in ln]
    assert "--eval-stages sft,rl_best_of_n " in evals[0]  # what this plan trained, not an adapter left in R


def test_start_refuses_methods_it_does_not_know_before_any_plan(tmp_path):
    logs = tmp_path / "logs"
    done = subprocess.run(["bash", str(SCRIPT), "start", str(tmp_path / "R"), "/kb"],
                          env={**os.environ, "LOGS": str(logs), "METHODS": "ppo"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "METHODS=ppo" in done.stderr
    assert not logs.exists()  # nothing started


def test_the_two_gpu_plan_with_base_s_zero_starts_grpo_beside_best_of_n_without_a_base_step(tmp_path):
    """BASE_S=0 (an earlier session's SFT adapter in R, found finished at once): GPU 1 neither evaluates the
    base model nor times baselines; it goes straight to GRPO once SFT's stage is over."""
    fake, calls = _fake_python(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {**_env_without_host_pools(), "LOGS": str(logs), "PY": str(fake), "SHIP": str(tmp_path / "ship"),
           "STAGGER_S": "0", "CUDA_VISIBLE_DEVICES": "0,1", "BASE_S": "0", "BASELINES": "/recs/L2.json"}
    subprocess.run(["bash", str(SCRIPT), "_eval2", str(tmp_path / "R"), "/kb"], env=env, check=True, timeout=60,
                   capture_output=True)
    lines = calls.read_text().splitlines()
    stages = [ln.split("--only ")[1].split()[0] for ln in lines if "--only " in ln]
    assert sorted(stages[1:3]) == ["best_of_n", "grpo"] and stages[0] == "sft" and stages[3] == "eval", lines
    assert not any("baselines" in ln or "--with-base" in ln for ln in lines)
    assert not (logs / "base.done").exists() and not (logs / "baselines.done").exists()


def test_data_one_builds_the_data_folder_first_in_every_plan_and_a_failure_stops_the_rest(tmp_path):
    """DATA=1: the data stage (on the host's cores, with the session's settings) before SFT in each plan; when
    it fails nothing after it starts. Without DATA the plans start at SFT, as before. Every plan ships SFT's
    adapter."""
    fake, calls = _fake_python(tmp_path)
    base = {**_env_without_host_pools(), "PY": str(fake), "SHIP": str(tmp_path / "ship"), "STAGGER_S": "0",
            "P": "rounds=12", "BASE_S": "0"}
    for plan, gpus in (("_eval", "0"), ("_eval2", "0,1"), ("_eval4", "0,1,2,3"), ("_evalsft", "0")):
        for data in ("1", ""):
            logs = tmp_path / f"logs{plan}{data}"
            logs.mkdir()
            calls.write_text("")
            env = {**base, "LOGS": str(logs), "CUDA_VISIBLE_DEVICES": gpus, "DATA": data}
            subprocess.run(["bash", str(SCRIPT), plan, str(tmp_path / "R"), "/kb"], env=env, timeout=60,
                           capture_output=True)
            stages = [ln.split("--only ")[1].split()[0] for ln in calls.read_text().splitlines() if "--only " in ln]
            if data:
                assert stages[:2] == ["data", "sft"], (plan, stages)
                line = next(ln for ln in calls.read_text().splitlines() if "--only data" in ln)
                assert "-p kernelbench=/kb" in line and "-p rounds=12" in line
            else:
                assert stages[0] == "sft" and "data" not in stages, (plan, stages)
            # every plan ships SFT's adapter (bf16, through $PY -c) for a later session to start RL from
            assert any(" -c " in ln and "bfloat16" in ln for ln in calls.read_text().splitlines()), plan
    logs = tmp_path / "logs_failed"
    logs.mkdir()
    calls.write_text("")
    subprocess.run(["bash", str(SCRIPT), "_eval2", str(tmp_path / "R"), "/kb"], timeout=60, capture_output=True,
                   env={**base, "LOGS": str(logs), "CUDA_VISIBLE_DEVICES": "0,1", "DATA": "1", "FAIL": "data"})
    assert [ln.split("--only ")[1].split()[0] for ln in calls.read_text().splitlines() if "--only " in ln] == ["data"]


def test_sft_kept_starts_rl_from_the_adapter_in_r_and_without_one_runs_nothing(tmp_path):
    """SFT_KEPT=1 in the RL plans: no SFT stage; the adapter unpacked into R is what both RL methods and the
    evaluation get, its corpus digest compared with the data folder's in sft.log; without a finished adapter in
    R the plan stops before RL."""
    fake, calls = _fake_python(tmp_path)
    run = tmp_path / "R"
    adapter = run / "runs" / "base" / "checkpoints" / "sft"
    adapter.mkdir(parents=True)
    for name in ("adapter_config.json", "adapter_model.safetensors", "sft_run.json"):  # a shipped adapter's files
        (adapter / name).write_text("{}")
    (run / "runs" / "base" / "data").mkdir(parents=True)
    (run / "runs" / "base" / "data" / "sft_train.jsonl").write_text("{}\n")
    base = {**_env_without_host_pools(), "PY": str(fake), "SHIP": str(tmp_path / "ship"), "STAGGER_S": "0",
            "BASE_S": "0", "SFT_KEPT": "1"}
    plans = (("_eval", "0"), ("_eval2", "0,1"), ("_eval4", "0,1,2,3"))
    for marker in (False, True):
        if marker:
            (adapter / "tritonrl_model.json").write_text("{}")  # the marker a finished save writes last
        for plan, gpus in plans:
            logs = tmp_path / f"logs{plan}{marker}"
            logs.mkdir()
            calls.write_text("")
            subprocess.run(["bash", str(SCRIPT), plan, str(run), "/kb"], timeout=60, capture_output=True,
                           env={**base, "LOGS": str(logs), "CUDA_VISIBLE_DEVICES": gpus})
            lines = calls.read_text().splitlines()
            stages = [ln.split("--only ")[1].split()[0] for ln in lines if "--only " in ln]
            log = (logs / "sft.log").read_text()
            assert "sft" not in stages, (plan, stages)
            if not marker:
                assert (logs / "sft.done").read_text().strip() == "1" and "no finished adapter" in log
                assert not {"best_of_n", "grpo", "eval"} & set(stages), (plan, stages)
                continue
            assert (logs / "sft.done").read_text().strip() == "0" and "used as it is" in log
            assert {"best_of_n", "grpo", "eval"} <= set(stages), (plan, stages)
            digest = next(ln for ln in lines if " -c " in ln and "file_sha256" in ln)  # the two corpus digests read
            assert f"{adapter}/sft_run.json" in digest and "data/sft_train.jsonl" in digest
            assert not any("bfloat16" in ln for ln in lines)  # nothing shipped: the adapter came from elsewhere
