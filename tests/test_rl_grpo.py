"""GRPO with TRL's GRPOTrainer on the tiny model: rewards come from the real verifier pool, an
optimizer step really moves the adapter, the curriculum and the log follow each step, and a run
killed between steps resumes from the Trainer's checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tritonrl_lib.model import load as models
from tritonrl_lib.train.rl.curriculum import read_curriculum_log
from tritonrl_lib.train.rl.best import read_best
from tritonrl_lib.train.rl.log import read_rl_log
from tritonrl_lib.train.rl.best_of_n import reference_candidates
from tritonrl_lib.train.rl.grpo import _slot_of, slot_dataset, train_grpo

from rl_fixtures import pool, prepare_run, smoke_config  # noqa: F401 (pool: a fixture)

REPO = Path(__file__).resolve().parent.parent


def test_slot_prompts_round_trip():
    ds = slot_dataset(3)
    assert [_slot_of(p) for p in ds["prompt"]] == [0, 1, 2]
    with pytest.raises(ValueError, match="slot_dataset"):
        _slot_of([{"role": "user", "content": "write a kernel"}])


@pytest.mark.slow
def test_grpo_steps_with_rewards_from_the_pool(tmp_path, pool):
    cfg = smoke_config(tmp_path, method="grpo", grpo_steps=2, n_samples=2, tasks_per_round=2)
    prepare_run(cfg)
    paths = cfg.paths
    res = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates)
    assert res.status == "trained" and res.rounds_done == 2

    log = read_rl_log(paths)
    assert [r["step"] for r in log] == [0, 1]
    for r in log:
        # per group: the injected reference solution (0.7: correct, no timing on the CPU) and one
        # sample of the tiny model (0: no code); the policy's own statistics leave the reference out
        assert r["injected"] == 2 and r["samples"] == 2
        assert sorted(r["rewards"]) == [0.0, 0.0, 0.7, 0.7]
        assert r["trl"]["loss"] != 0.0 and r["trl"]["grad_norm"] > 0.0  # a real policy-gradient step
        assert r["verify"]["candidates"] == 4
        assert len(r["tasks"]) == 2 and r["curriculum_p"] == pytest.approx(0.1)
        assert r["by_task"] == {t: [0, 1] for t in r["tasks"]}  # the policy's own sample per task
    assert [c["step"] for c in read_curriculum_log(paths.curriculum_log)] == [0, 1]

    marker = json.loads((paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["method"] == "grpo" and marker["final"] and marker["steps"] == 2
    sft = load_file(str(paths.sft_checkpoint / "adapter_model.safetensors"))
    rl = load_file(str(paths.rl_checkpoint / "adapter_model.safetensors"))
    assert sft.keys() == rl.keys() and any(not torch.equal(sft[k], rl[k]) for k in sft)
    assert read_best(paths)["method"] == "grpo"

    again = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates)
    assert again.status == "already_done"


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from rl_fixtures import smoke_config
    from tritonrl_lib.train.rl.grpo import train_grpo
    from tritonrl_lib.train.rl.best_of_n import reference_candidates

    def echo(msg):
        print(msg, flush=True)
        if msg.startswith("grpo step 1:"):  # step 0 is checkpointed; step 1 is being scored
            os.kill(os.getpid(), signal.SIGKILL)

    train_grpo(smoke_config({out!r}, **{overrides!r}), extra_candidates=reference_candidates, echo=echo)
""")


@pytest.mark.slow
def test_killed_grpo_resumes_from_the_trainer_checkpoint(tmp_path, pool):
    overrides = {"method": "grpo", "grpo_steps": 2, "n_samples": 2, "tasks_per_round": 1}
    cfg = smoke_config(tmp_path, **overrides)
    prepare_run(cfg)
    paths = cfg.paths
    script = KILL_SCRIPT.format(tests=str(REPO / "tests"), out=str(tmp_path), overrides=overrides)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert (paths.rl_checkpoint / "checkpoint-1" / "trainer_state.json").is_file()
    assert not models.checkpoint_complete(paths.rl_checkpoint)
    assert [c["step"] for c in read_curriculum_log(paths.curriculum_log)] == [0, 1]  # step 1 logged, not saved

    messages: list[str] = []
    res = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates, echo=messages.append)
    assert res.status == "resumed" and res.rounds_done == 2
    assert any("resuming from checkpoint-1" in m for m in messages)
    assert [m for m in messages if m.startswith("grpo step")] == [m for m in messages if m.startswith("grpo step 1")]
    assert [r["step"] for r in read_rl_log(paths)] == [0, 1]
    assert [c["step"] for c in read_curriculum_log(paths.curriculum_log)] == [0, 1]
    assert json.loads((paths.rl_checkpoint / models.MARKER).read_text())["final"]


@pytest.mark.slow
def test_grpo_kl_is_measured_against_the_sft_adapter(tmp_path, pool):
    """grpo_beta > 0: the KL term's reference is the SFT policy RL starts from (TRL keeps a frozen copy of
    the adapter), not the bare base model. An SFT adapter far from the base shows which one it is: at step 0
    the policy is the SFT adapter itself, so its KL to the reference is zero only if that is the reference."""
    cfg = smoke_config(tmp_path, method="grpo", grpo_steps=1, n_samples=2, tasks_per_round=1, grpo_beta=0.1,
                       lora_dropout=0.0)
    paths = cfg.paths.ensure()
    model, tok = models.load_policy(cfg, trainable=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 2.0)
        ids = tok("def forward(self, x):\n    return x", return_tensors="pt")["input_ids"]
        tuned = torch.log_softmax(model(input_ids=ids).logits.float(), -1)
        with model.disable_adapter():
            bare = torch.log_softmax(model(input_ids=ids).logits.float(), -1)
    kl_to_base = (tuned.exp() * (tuned - bare)).sum(-1).mean().item()
    assert kl_to_base > 0.01  # the SFT adapter moves the model: a base reference could not give ~0
    models.save_checkpoint(model, tok, paths.sft_checkpoint, base_model=cfg.model.model, extra={"stage": "sft"})

    res = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates)
    assert res.status == "trained"
    step0 = read_rl_log(paths)[0]["trl"]
    assert 0.0 <= step0["kl"] < kl_to_base / 100, (step0, kl_to_base)
    # the reference copy is TRL's, kept out of the adapters saved (PEFT would write it to a ref/ subfolder)
    assert (paths.rl_checkpoint / "adapter_model.safetensors").is_file()
    assert not (paths.rl_checkpoint / "ref").exists() and not (paths.rl_best_adapter / "ref").exists()
