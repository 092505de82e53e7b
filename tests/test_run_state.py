"""A pipeline step's record: current while its settings, inputs and outputs are as it left them."""

from __future__ import annotations

import os

import pytest

from tritonrl_lib.run import state as run_state
from tritonrl_lib.core.config import load_config


@pytest.fixture
def cfg(run_dir):
    return load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "state"})


def finish(cfg, name: str) -> dict:
    """Record step `name` as `tritonrl run` does: inputs fingerprinted before, outputs after."""
    paths = cfg.paths
    step = run_state.step_of(name)
    inputs = run_state.artefacts(paths, step.reads)
    return run_state.write_record(cfg, paths, name, "nb-sha", inputs, wall_s=1.0)


def test_a_finished_step_is_current_until_its_inputs_settings_or_outputs_change(cfg, run_dir):
    paths = cfg.paths.ensure()
    paths.sft_train.write_text('{"id": "a"}\n')
    (paths.sft_checkpoint / "adapter_model.safetensors").parent.mkdir(parents=True, exist_ok=True)
    (paths.sft_checkpoint / "adapter_model.safetensors").write_bytes(b"weights-1")
    finish(cfg, "02_sft")
    assert run_state.why_stale(cfg, paths, "02_sft", "nb-sha") is None
    assert run_state.why_stale(cfg, paths, "02_sft", "other-sha") == "the notebook changed"

    # a setting 02_sft does not read changes nothing; one it reads does, and says which
    other = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "state", "num_tasks": 9, "workers": 1})
    assert run_state.why_stale(other, paths, "02_sft") is None
    lr = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "state", "learning_rate": 0.1})
    assert run_state.why_stale(lr, paths, "02_sft") == "settings changed: sft.learning_rate 0.0002 -> 0.1"

    # rewriting a file with the same bytes is no change; other bytes are
    paths.sft_train.write_text('{"id": "a"}\n')
    assert run_state.why_stale(cfg, paths, "02_sft") is None
    paths.sft_train.write_text('{"id": "b"}\n')
    assert run_state.why_stale(cfg, paths, "02_sft") == "data/sft_train.jsonl changed since it ran"
    assert run_state.stale_inputs(paths, "02_sft") == ["data/sft_train.jsonl"]
    paths.sft_train.write_text('{"id": "a"}\n')

    # the notebook ran again elsewhere (papermill, JupyterLab) and replaced its adapter
    (paths.sft_checkpoint / "adapter_model.safetensors").write_bytes(b"weights-2")
    why = run_state.why_stale(cfg, paths, "02_sft")
    assert why.startswith("checkpoints/sft changed after it finished")


def test_unchanged_files_are_not_hashed_again(cfg, monkeypatch):
    paths = cfg.paths.ensure()
    paths.sft_train.write_text("x\n")
    first = run_state.fingerprint(paths.sft_train, paths.root)
    calls = []
    monkeypatch.setattr(run_state, "file_sha256", lambda p: calls.append(p) or "h")
    again = run_state.fingerprint(paths.sft_train, paths.root, first)
    assert again == first and calls == []
    os.utime(paths.sft_train, ns=(1, 1))  # touched: hashed again
    run_state.fingerprint(paths.sft_train, paths.root, first)
    assert calls == [paths.sft_train]


def test_scratch_files_of_atomic_writes_are_not_artefacts(cfg):
    paths = cfg.paths.ensure()
    (paths.eval_dir / "eval_base.json").write_text("{}")
    before = run_state.fingerprint(paths.eval_dir, paths.root)
    (paths.eval_dir / ".eval_sft.json.123.tmp").write_text("half")
    assert run_state.fingerprint(paths.eval_dir, paths.root)["digest"] == before["digest"]


def test_a_record_from_before_records_held_settings_is_not_current(cfg):
    paths = cfg.paths.ensure()
    paths.step_record("01_data").write_text('{"params": {}, "notebook_sha": "x", "finished_at": 1.0}')
    assert run_state.why_stale(cfg, paths, "01_data") == "not run by `tritonrl run` yet"
    paths.step_record("01_data").write_text('{"params": ')  # cut short by a kill
    assert run_state.read_record(paths, "01_data") is None


def test_speed_only_settings_and_unknown_notebooks():
    cfg = load_config("smoke")
    data = run_state.step_settings(cfg, run_state.step_of("01_data"))
    assert "verify.atol" in data and "verify.workers" not in data and "verify.prestart_child" not in data
    anything = run_state.step_settings(cfg, run_state.step_of("07_extra"))
    assert "rl.n_samples" in anything and "eval.num_tasks" in anything and "run" not in anything
    # every declared artefact is a RunPaths name
    for name, step in run_state.STEPS.items():
        for attr in (*step.reads, *step.writes, *step.watch):
            assert hasattr(cfg.paths, attr), (name, attr)


def test_a_notebook_run_on_its_own_warns_only_over_a_finished_step_and_is_named_next_time(cfg, run_dir):
    paths = cfg.paths.ensure()
    paths.sft_train.write_text('{"id": "a"}\n')
    adapter = paths.sft_checkpoint / "adapter_model.safetensors"
    adapter.parent.mkdir(parents=True, exist_ok=True)
    adapter.write_bytes(b"weights-1")
    assert run_state.note_alone_run(cfg, paths, "02_sft") is None  # nothing finished here yet: nothing to warn of
    finish(cfg, "02_sft")
    adapter.write_bytes(b"weights-2")  # replaced by hand, not by a notebook that left a note
    assert run_state.why_stale(cfg, paths, "02_sft").startswith(
        "checkpoints/sft changed after it finished: something other than `tritonrl run` wrote there")
    adapter.write_bytes(b"weights-1")
    finish(cfg, "02_sft")
    lr = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "state", "learning_rate": 0.1})
    warning = run_state.note_alone_run(lr, paths, "02_sft")
    assert warning.startswith(f"WARNING: `tritonrl run` finished 02_sft in {paths.root} on ")
    assert ("with other settings (sft.learning_rate 0.0002 -> 0.1): it will replace that result "
            "(checkpoints/sft, logs/sft_log.jsonl)") in warning
    adapter.write_bytes(b"weights-3")  # what that notebook then wrote
    why = run_state.why_stale(cfg, paths, "02_sft")
    assert why.startswith("checkpoints/sft changed after it finished: 02_sft was run on its own (papermill or "
                          "JupyterLab) on ")
    assert "with other settings (sft.learning_rate 0.0002 -> 0.1), and replaced what `tritonrl run` had made" in why
    run_state.forget_alone_run(paths, "02_sft")
    assert "something other than `tritonrl run`" in run_state.why_stale(cfg, paths, "02_sft")


def test_an_interrupted_step_says_so_next_time(cfg):
    paths = cfg.paths.ensure()
    run_state.write_interrupted(paths, "03_rl", "Ctrl-C", 12.5)
    assert run_state.why_stale(cfg, paths, "03_rl").startswith("it was interrupted (Ctrl-C) on ")
    assert run_state.stale_inputs(paths, "03_rl") == []  # the report reads such a record too

