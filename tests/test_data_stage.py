"""The data stage's bookkeeping: what it writes, when it may skip, KernelBook rows joining the SFT set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.data import Split, build_data, data_is_current, read_difficulty_labels, read_sft_examples
from tritonrl_lib.data.stage import data_settings

KB = Path(__file__).resolve().parent / "fixtures" / "kernelbook" / "rows.parquet"


def _cfg(run_dir, **over):
    # n_sft_examples=0: the generator is not needed to test the stage's own logic (it has its own tests)
    return load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "stage", "n_sft_examples": 0, **over})


def test_stage_writes_everything_and_knows_when_it_is_current(run_dir):
    cfg = _cfg(run_dir)
    assert data_is_current(cfg, cfg.paths) == (False, "split.json is missing")
    first = build_data(cfg, cfg.paths, progress=False)
    assert not first.skipped_generation
    split = Split.load(cfg.paths.split)
    assert split.settings == data_settings(cfg, first.tasks) and split.counts["sft_examples"] == 0
    assert len(read_difficulty_labels(cfg.paths.difficulty_labels)) == len(first.tasks)
    assert data_is_current(cfg, cfg.paths) == (True, "outputs match the settings")
    again = build_data(cfg, cfg.paths, progress=False)
    assert again.skipped_generation and any("generation skipped" in m for m in again.messages)

    fewer = first.tasks[:-1]  # the suite lost a task: the split (and the data) may change
    assert data_is_current(cfg, cfg.paths, fewer) == (False, "settings changed: tasks")
    assert data_is_current(cfg, cfg.paths, first.tasks)[0]
    changed = _cfg(run_dir, heldout_fraction=0.5)
    ok, why = data_is_current(changed, changed.paths)
    assert not ok and why == "settings changed: heldout_fraction"
    for key, value in (("heldout_family_levels", [1]), ("sft_family_weights", "epilogue_chain:3")):
        ok, why = data_is_current(_cfg(run_dir, **{key: value}), cfg.paths)
        assert not ok and why == f"settings changed: {key}"
    cfg.paths.sft_train.write_text('{"id": "x"}\n')  # a file that does not hold what split.json recorded
    assert data_is_current(cfg, cfg.paths) == (False, "sft_train.jsonl does not hold the recorded number of examples")
    assert not build_data(cfg, cfg.paths, force=True, progress=False).skipped_generation


def test_kernelbook_rows_join_the_sft_set_and_the_labels(run_dir):
    cfg = _cfg(run_dir, kernelbook_source=str(KB), heldout_fraction=0.0)
    result = build_data(cfg, cfg.paths, progress=False)
    examples = read_sft_examples(cfg.paths.sft_train)
    assert [e.task_id for e in examples] == [f"kernelbook/kb-000{i}" for i in (1, 2, 3, 4)]
    assert all(e.origin == "kernelbook" and not e.verified and "class ModelNew" in e.solution for e in examples)
    kb_labels = [r for r in read_difficulty_labels(cfg.paths.difficulty_labels) if r.origin == "kernelbook"]
    assert len(kb_labels) == 4 and all(r.declared_level is None for r in kb_labels)
    assert result.counts["kernelbook"]["skipped"] == {"entry_point_not_found": 1, "python_syntax_error": 1,
                                                      "no_triton_kernel": 1, "duplicate": 1}
    assert any(m.startswith("KernelBook: 4 of 8 rows") for m in result.messages)


def test_the_corpus_is_verified_without_timing_or_a_reference_cache_whatever_the_run_sets():
    from tritonrl_lib.data.stage import data_verify_config
    from tritonrl_lib.verify.settings import JobSettings

    cfg = load_config("gpu", overrides={"data_verify_device": "auto", "timing": "on"})
    v = data_verify_config(cfg)
    assert v.timing == "off" and v.reference_cache_mb == 0
    assert not JobSettings.for_device(v, "cuda").timing_enabled  # what a GPU worker is told
    assert cfg.verify.timing == "on"  # the run's own setting (RL, evaluation) is untouched


def test_family_weights_are_checked_before_any_verifier_and_idle_ones_are_said(run_dir, monkeypatch):
    import tritonrl_lib.verify as verify
    from tritonrl_lib.core.errors import ConfigError

    monkeypatch.setattr(verify, "VerifierPool", None)  # a pool started before the check would fail on this
    with pytest.raises(ConfigError, match=r"data\.sft_family_weights names 'chains'.*-p sft_family_weights="):
        build_data(_cfg(run_dir, sft_family_weights="chains:3", n_sft_examples=5), _cfg(run_dir).paths,
                   progress=False)
    # gemm_chain is held out at seed 0 with both levels holding families out, trained with Level 1 alone
    held = build_data(_cfg(run_dir, sft_family_weights="gemm_chain:3"), _cfg(run_dir).paths, progress=False)
    assert "gemm_chain" in held.split.heldout_families
    assert any(m.startswith("sft_family_weights: gemm_chain:3 names no train family") for m in held.messages)
    trained = build_data(_cfg(run_dir, sft_family_weights="gemm_chain:3", heldout_family_levels=[1]),
                         _cfg(run_dir).paths, progress=False)
    assert trained.split.levels == [1] and "gemm_chain" in trained.split.train_families
    assert not any("names no train family" in m for m in trained.messages)
    assert Split.load(_cfg(run_dir).paths.split).levels == [1]


def test_the_stage_generates_with_its_weights(run_dir):
    """One round of the generator over the 92 train families of Level-1-only holding out: each weighted family
    (the epilogue chains) gives three examples, every other one. The pool passes every candidate: the order is
    the stage's alone."""
    from verifier_fixtures import PassEverything

    cfg = _cfg(run_dir, sft_family_weights="epilogue_chain:3", heldout_family_levels=[1], n_sft_examples=102)
    res = build_data(cfg, cfg.paths, progress=False, pool=PassEverything(), force=True)
    kept = res.counts["generated"]["kept_by_family"]
    assert len(res.split.train_families) == 92 and len(res.examples) == 102
    assert {f: kept[f] for f in ("gemm_chain", "conv_chain", "chain_reduce")} == dict.fromkeys(
        ("gemm_chain", "conv_chain", "chain_reduce"), 3)
    assert kept["relu"] == kept["gemm_reduce"] == 1  # reduce_epilogue is another category: not weighted here
