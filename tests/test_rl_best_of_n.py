"""Best-of-N end to end on the tiny model with the real verifier pool: a round samples, verifies,
keeps only correct completions, fine-tunes and saves to checkpoints/rl; a run killed mid-round
resumes without verifying again."""

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
from tritonrl_lib.core.config import ConfigError
from tritonrl_lib.train.rl.curriculum import read_curriculum_log
from tritonrl_lib.core.jsonio import read_jsonl, write_jsonl
from tritonrl_lib.model.prompts import build_messages, format_completion
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.train.rl.best import read_best
from tritonrl_lib.train.rl.log import read_rl_log
from tritonrl_lib.train.rl.start import RLStartError, select_rl_tasks
from tritonrl_lib.train.rl.best_of_n import replay_rows, reference_candidates, select_top_k, train_best_of_n
from tritonrl_lib.verify.pool import VerifierPool

from rl_fixtures import RL_TASKS, good_and_bad, prepare_run, smoke_config

REPO = Path(__file__).resolve().parent.parent


class CountingPool(VerifierPool):
    """The real pool, counting the candidates it is asked to verify."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.candidates = 0

    def map(self, tasks, completions, **kw):
        self.candidates += len(completions)
        return super().map(tasks, completions, **kw)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    cfg = smoke_config(tmp_path_factory.mktemp("pool"))
    p = CountingPool(cfg.verify, progress=False)
    yield p
    p.close()


def adapter_weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "adapter_model.safetensors"))


# --------------------------------------------------------------------------- pieces


def cand(i, reward, correct, speedup=None, text=None, injected=False, tokens=10):
    return {"task_id": "t", "sample_index": i, "injected": injected, "text": text or f"completion {i}",
            "num_tokens": tokens, "verdict": {"reward": reward, "correct": correct, "speedup": speedup}}


def test_select_top_k_keeps_correct_only_by_reward_then_speedup():
    cands = [cand(0, 0.5, False), cand(1, 0.7, True, speedup=1.2), cand(2, 0.85, True, speedup=3.0),
             cand(3, 0.7, True, speedup=1.8), cand(4, 0.7, True, speedup=1.8, tokens=5),
             cand(5, 0.3, False), cand(6, 0.85, True, speedup=3.0, text="completion 2")]  # a duplicate of 2
    kept = select_top_k(cands, 3)
    assert [c["sample_index"] for c in kept] == [2, 4, 3]
    assert all(c["verdict"]["correct"] for c in select_top_k(cands, 10))
    assert len(select_top_k(cands, 10)) == 4  # 5 correct, one a duplicate
    assert select_top_k([cand(0, 0.5, False)], 3) == []


def test_rl_needs_the_sft_adapter(tmp_path):
    cfg = smoke_config(tmp_path)
    with pytest.raises(RLStartError, match="02_sft"):
        train_best_of_n(cfg)


def test_task_selection(tmp_path):
    cfg = smoke_config(tmp_path, rl_tasks="train")
    with pytest.raises(RLStartError, match="01_data"):
        select_rl_tasks(cfg)
    prepare_run(cfg, split=True)
    from tritonrl_lib.data.split import Split

    split = Split.load(cfg.paths.split)
    train = select_rl_tasks(cfg)
    assert train and not {t.id for t in train} & set(split.heldout_task_ids)
    assert not {t.op_family for t in train} & set(split.heldout_families)
    assert {t.level for t in train} == {1, 2}
    assert [t.id for t in select_rl_tasks(smoke_config(tmp_path))] == RL_TASKS.split(",")
    assert all(t.level == 1 for t in select_rl_tasks(smoke_config(tmp_path, rl_tasks="level1")))
    held = set(split.heldout_task_ids) | {t.id for t in load_tasks("builtin") if t.op_family in split.heldout_families}
    for sel, levels in (("all", {1, 2}), ("level1", {1}), ("level2", {2})):  # the split is never crossed
        chosen = select_rl_tasks(smoke_config(tmp_path, rl_tasks=sel))
        assert chosen and not {t.id for t in chosen} & held and {t.level for t in chosen} == levels, sel
    with pytest.raises(ConfigError, match="unknown task ids"):
        select_rl_tasks(smoke_config(tmp_path, rl_tasks="builtin/L1/nope"))


# --------------------------------------------------------------------------- a round, end to end


@pytest.mark.slow
def test_a_round_keeps_only_correct_completions_and_trains(tmp_path, pool):
    cfg = smoke_config(tmp_path, tasks_per_round=2, n_samples=2, top_k=2, rounds=1)
    prepare_run(cfg)
    paths = cfg.paths
    before = pool.candidates
    res = train_best_of_n(cfg, pool=pool, extra_candidates=good_and_bad)
    assert res.status == "trained" and res.rounds_done == 1

    round0 = paths.rl_round(0)
    assert round0.dir == paths.rl_checkpoint / "rounds" / "round-000"
    cands = read_jsonl(round0.samples)
    policy = [c for c in cands if not c["injected"]]
    injected = [c for c in cands if c["injected"]]
    assert len(policy) == 4 and len(injected) == 4  # 2 tasks x (2 samples + 2 injected)
    assert pool.candidates - before == 8  # every candidate went through the pool, once
    assert all(c["verdict"]["task_id"] == c["task_id"] for c in cands)
    good = [c for c in injected if c["sample_index"] == 2]
    bad = [c for c in injected if c["sample_index"] == 3]
    assert all(c["verdict"]["correct"] and c["verdict"]["stage"] == "full" for c in good)
    assert not any(c["verdict"]["correct"] for c in bad)

    kept = read_jsonl(round0.kept)
    correct_texts = {c["text"] for c in cands if c["verdict"]["correct"]}
    assert kept and all(k["text"] in correct_texts for k in kept)
    assert {k["text"] for k in kept} >= {c["text"] for c in good}

    (rec,) = read_rl_log(paths)
    assert rec["round"] == 0 and rec["samples"] == 4 and rec["injected"] == 4
    assert rec["kept"] == len(kept) and rec["train"]["examples"] == len(kept) and rec["train"]["steps"] >= 1
    assert rec["verify"]["candidates"] == 8 and rec["verifications_per_min"] > 0
    assert rec["rollout"]["tokens"] > 0 and rec["rollout_tokens_per_s"] > 0
    assert rec["curriculum_p"] == pytest.approx(0.1)
    assert set(rec["by_level"]) <= {"1", "2"}
    # each task's own first attempts (the injected references left out), what `seen_before` reads
    assert sum(n for _, n in rec["by_task"].values()) == 4 and set(rec["by_task"]) <= set(rec["tasks"])

    # the adapter: trained, saved where eval looks, marked final; best.json points at a saved policy
    assert models.checkpoint_complete(paths.rl_checkpoint)
    marker = json.loads((paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["stage"] == "rl" and marker["final"] and marker["method"] == "best_of_n"
    sft_w, rl_w = adapter_weights(paths.sft_checkpoint), adapter_weights(paths.rl_checkpoint)
    assert sft_w.keys() == rl_w.keys()
    assert any(not torch.equal(sft_w[k], rl_w[k]) for k in sft_w)
    best = read_best(paths)
    assert best["round"] == 0 and best["policy"] == "sft" and models.checkpoint_complete(Path(best["path"]))
    assert [r["step"] for r in read_curriculum_log(paths.curriculum_log)] == [0]

    # a finished run is found finished
    again = train_best_of_n(cfg, pool=pool, extra_candidates=good_and_bad)
    assert again.status == "already_done" and pool.candidates - before == 8

    # killed after the round's adapter was saved but before checkpoints/rl was: restored from the round
    (paths.rl_checkpoint / models.MARKER).unlink()
    (paths.rl_checkpoint / "adapter_model.safetensors").unlink()
    restored = train_best_of_n(cfg, pool=pool, extra_candidates=good_and_bad)
    assert restored.status == "resumed" and pool.candidates - before == 8
    assert models.checkpoint_complete(paths.rl_checkpoint)
    assert json.loads((paths.rl_checkpoint / models.MARKER).read_text())["final"]
    restored_w = adapter_weights(paths.rl_checkpoint)
    assert all(torch.equal(restored_w[k], rl_w[k]) for k in rl_w)


def write_corpus(path: Path, per_family: int = 2) -> list[dict]:
    """An SFT corpus in 01_data's layout: each family's reference solution, `per_family` times with
    different prose (distinct rows)."""
    tasks = {t.op_family: t for t in load_tasks("builtin", levels=1) if t.reference_solution}
    rows = [{"op_family": fam, "prompt": build_messages(t),
             "completion": [{"role": "assistant", "content": format_completion(t.reference_solution, f"Take {i}.")}]}
            for fam, t in sorted(tasks.items())[:5] for i in range(per_family)]
    write_jsonl(path, rows)
    return rows


def test_replay_takes_every_family_in_turn_and_is_seeded(tmp_path):
    corpus = write_corpus(tmp_path / "sft_train.jsonl", per_family=3)
    families = {r["op_family"] for r in corpus}
    five = replay_rows(tmp_path / "sft_train.jsonl", 5, seed=1)
    fam_of = {r["completion"][0]["content"]: r["op_family"] for r in corpus}
    assert len(five) == 5 and {fam_of[r["completion"][0]["content"]] for r in five} == families  # one each first
    assert five == replay_rows(tmp_path / "sft_train.jsonl", 5, seed=1)
    assert five != replay_rows(tmp_path / "sft_train.jsonl", 5, seed=2)
    assert all(set(r) == {"prompt", "completion"} for r in five)
    everything = replay_rows(tmp_path / "sft_train.jsonl", 100, seed=1)
    assert len(everything) == len(corpus)  # at most the corpus, each example once
    assert len({r["completion"][0]["content"] for r in everything}) == len(corpus)
    assert replay_rows(tmp_path / "sft_train.jsonl", 0, seed=1) == []


def test_replay_needs_the_corpus_and_joins_the_fine_tune(tmp_path, pool):
    cfg = smoke_config(tmp_path, tasks_per_round=2, n_samples=2, top_k=2, rounds=1, replay_ratio=1.0)
    prepare_run(cfg)
    with pytest.raises(ConfigError, match="replay_ratio"):
        train_best_of_n(cfg, pool=pool, extra_candidates=good_and_bad)
    corpus = write_corpus(cfg.paths.sft_train)
    logged = []
    res = train_best_of_n(cfg, pool=pool, extra_candidates=good_and_bad, echo=logged.append)
    assert res.status == "trained"
    (rec,) = read_rl_log(cfg.paths)
    want = min(rec["kept"], len(corpus))
    assert rec["kept"] >= 1 and rec["replayed"] == want and rec["train"]["examples"] == rec["kept"] + want
    assert any(f"and {want} replayed SFT examples" in m for m in logged)


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from rl_fixtures import smoke_config
    from tritonrl_lib.train.rl.best_of_n import train_best_of_n, reference_candidates

    def echo(msg):
        print(msg, flush=True)
        if msg.startswith("round 1: fine-tuned"):  # trained, adapter not yet saved
            os.kill(os.getpid(), signal.SIGKILL)

    cfg = smoke_config({out!r}, **{overrides!r})
    train_best_of_n(cfg, extra_candidates=reference_candidates, echo=echo)
""")


@pytest.mark.slow
def test_killed_run_resumes_without_verifying_again(tmp_path, pool):
    overrides = {"tasks_per_round": 2, "n_samples": 2, "top_k": 1, "rounds": 2}
    cfg = smoke_config(tmp_path, **overrides)
    prepare_run(cfg)
    paths = cfg.paths
    script = KILL_SCRIPT.format(tests=str(REPO / "tests"), out=str(tmp_path), overrides=overrides)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-3000:]
    r0, r1 = paths.rl_round(0), paths.rl_round(1)
    assert models.checkpoint_complete(r0.adapter)
    assert r1.meta.is_file()
    assert not models.checkpoint_complete(r1.adapter)
    round0 = {p.name: p.stat().st_mtime_ns for p in r0.dir.rglob("*") if p.is_file()}
    samples1 = r1.samples.read_text()

    before = pool.candidates
    messages: list[str] = []
    res = train_best_of_n(cfg, pool=pool, extra_candidates=reference_candidates, echo=messages.append)
    assert res.status == "resumed"
    assert pool.candidates == before  # round 1's verdicts were on disk: nothing verified again
    assert any("reusing its 6 verified candidates" in m for m in messages)
    assert {p.name: p.stat().st_mtime_ns for p in r0.dir.rglob("*") if p.is_file()} == round0
    assert r1.samples.read_text() == samples1
    assert models.checkpoint_complete(r1.adapter)
    assert json.loads((paths.rl_checkpoint / models.MARKER).read_text())["final"]
    assert [r["round"] for r in read_rl_log(paths)] == [0, 1]
    assert [r["step"] for r in read_curriculum_log(paths.curriculum_log)] == [0, 1]
