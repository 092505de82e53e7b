"""SFT survives SIGKILL: the same command resumes from the last complete trainer checkpoint and ends
where an uninterrupted run ends. And the same entry point runs as a two-process DDP group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.train.sft.train import train_sft
from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records
from tritonrl_lib.train.trainer_checkpoints import checkpoint_is_complete, latest_complete_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

# One BLAS thread everywhere: the in-process run and the subprocesses then compute bit-for-bit alike.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _settings(run_dir, tiny_dir: str) -> dict:
    return {"outputs_dir": str(run_dir), "model": tiny_dir, "max_samples": 8, "max_seq_len": 768,
            "per_device_batch_size": 1, "epochs": 2, "save_steps": 2, "save_total_limit": 3}


def _cli(settings: dict) -> list[str]:
    out = ["--params", "smoke"]
    for k, v in settings.items():
        out += ["-p", f"{k}={v}"]
    return out


def test_sigkill_mid_run_resumes_from_the_last_complete_checkpoint(run_dir):
    tiny_dir = str(models.tiny_model_dir())  # one fixed model folder for all three runs
    settings = _settings(run_dir, tiny_dir)
    killed = load_config("smoke", overrides={**settings, "run": "killed"})
    whole = load_config("smoke", overrides={**settings, "run": "whole"})
    for cfg in (killed, whole):
        write_records(cfg.paths.sft_train, toy_sft_records(8))
    ckpt = killed.paths.sft_checkpoint
    cmd = [sys.executable, "-m", "tritonrl_lib.train.sft.train", *_cli(settings), "--run", "killed"]

    # 1. start, wait for checkpoint-4 to be complete, SIGKILL
    first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and first.poll() is None and not checkpoint_is_complete(ckpt / "checkpoint-4"):
        time.sleep(0.1)
    assert first.poll() is None, "the first run ended before it could be killed"
    assert checkpoint_is_complete(ckpt / "checkpoint-4"), "no checkpoint-4 within the deadline"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    resume_from = latest_complete_checkpoint(ckpt)
    k = int(resume_from.name.split("-")[1])
    assert 4 <= k < 16 and not models.checkpoint_complete(ckpt)  # mid-run: no final adapter yet
    # what a kill during a checkpoint write leaves: a newer folder without trainer_state.json
    half = ckpt / f"checkpoint-{k + 2}"
    shutil.rmtree(half, ignore_errors=True)
    shutil.copytree(resume_from, half)
    (half / "trainer_state.json").unlink()

    # 2. the same command again: resumes from k, not from 0 and not from the half-written folder
    second = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming from {resume_from} (step {k})" in second.stdout
    assert f"SFT resumed: world_size=1 steps=16/16" in second.stdout and str(ckpt) in second.stdout
    assert models.checkpoint_complete(ckpt)
    marker = json.loads((ckpt / models.MARKER).read_text())
    assert marker["global_step"] == 16 and marker["base_model"] == tiny_dir

    log = read_jsonl(killed.paths.sft_log)
    assert [r["step"] for r in log] == list(range(1, 17))  # every step once, none repeated
    assert {r["session"] for r in log if r["step"] <= k} == {1}
    assert {r["session"] for r in log if r["step"] > k} == {2}  # global_step continued from k

    # 3. it ends where an uninterrupted run ends (optimizer, scheduler, RNG and data order restored)
    result = train_sft(whole, echo=lambda s: None)
    assert result.global_step == 16
    whole_log = read_jsonl(whole.paths.sft_log)
    for a, b in zip(log, whole_log):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5) and a["learning_rate"] == pytest.approx(b["learning_rate"])
    from safetensors.torch import load_file

    resumed_w, whole_w = (load_file(c / "adapter_model.safetensors") for c in (ckpt, whole.paths.sft_checkpoint))
    assert resumed_w.keys() == whole_w.keys()
    for name in resumed_w:
        torch.testing.assert_close(resumed_w[name], whole_w[name], atol=1e-5, rtol=1e-4)

    # 4. the adapter loads as later stages load it
    model, _ = models.load_policy(killed, adapter=ckpt, trainable=False)
    assert any("lora_" in n for n, _ in model.named_parameters())

    # 5. and the same command once more does not retrain
    third = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0 and "SFT already finished" in third.stdout and str(ckpt) in third.stdout
    assert read_jsonl(killed.paths.sft_log) == log


@pytest.mark.skipif(shutil.which("torchrun") is None and not os.path.exists(os.path.join(os.path.dirname(sys.executable), "torchrun")),
                    reason="torchrun not installed")
def test_two_process_ddp_run_on_cpu(run_dir):
    """The entry point under a launcher (torchrun here; accelerate launch on GPUs): one log, one
    summary line, one adapter, written by rank 0."""
    tiny_dir = str(models.tiny_model_dir())
    settings = {**_settings(run_dir, tiny_dir), "per_device_batch_size": 2, "epochs": 1, "run": "ddp"}
    cfg = load_config("smoke", overrides=settings)
    write_records(cfg.paths.sft_train, toy_sft_records(8))
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun if os.path.exists(torchrun) else "torchrun", "--nproc_per_node", "2",
           "-m", "tritonrl_lib.train.sft.train", *_cli(settings)]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    summaries = [line for line in proc.stdout.splitlines() if line.startswith("SFT trained:")]
    assert len(summaries) == 1 and "world_size=2" in summaries[0] and "tokens/s=" in summaries[0]
    # 8 examples, 2 per process, 2 processes: 2 optimizer steps, each logged once
    assert [r["step"] for r in read_jsonl(cfg.paths.sft_log)] == [1, 2]
    assert models.checkpoint_complete(cfg.paths.sft_checkpoint)
    assert json.loads((cfg.paths.sft_checkpoint / models.MARKER).read_text())["world_size"] == 2
