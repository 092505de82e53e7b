"""SFT's held-out slice (its loss logged beside the training loss) and its time budget, on the
tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from tritonrl_lib.report import charts
from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.train.sft.train import load_sft_datasets, train_sft
from tritonrl_lib.train.sft.log import spent_before
from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_cfg(run_dir, n: int, **overrides):
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "h", "model": str(models.tiny_model_dir()),
                                          "max_seq_len": 768, "max_samples": n, **overrides})
    write_records(cfg.paths.sft_train, toy_sft_records(n))
    return cfg


def test_the_heldout_slice_is_disjoint_seeded_and_optional(run_dir):
    cfg = make_cfg(run_dir, 20)
    train, held = load_sft_datasets(cfg.paths, 100, seed=0, eval_fraction=0.2)
    key = lambda r: json.dumps([r["prompt"], r["completion"]])  # noqa: E731
    assert len(held) == 4 and len(train) == 16
    assert not {key(r) for r in train} & {key(r) for r in held}
    again = load_sft_datasets(cfg.paths, 100, seed=0, eval_fraction=0.2)[1]
    assert [key(r) for r in again] == [key(r) for r in held]
    assert [key(r) for r in load_sft_datasets(cfg.paths, 100, seed=1, eval_fraction=0.2)[1]] != [key(r) for r in held]
    assert load_sft_datasets(cfg.paths, 8, seed=0, eval_fraction=0.2)[0].num_rows == 8  # max_samples caps training
    assert load_sft_datasets(cfg.paths, 100, seed=0)[1] is None


@pytest.mark.slow
def test_heldout_loss_is_logged_beside_the_training_loss(run_dir):
    cfg = make_cfg(run_dir, 8, epochs=4, eval_fraction=0.25, eval_steps=2, learning_rate=1e-2, save_steps=100)
    res = train_sft(cfg, echo=lambda s: None)
    log = read_jsonl(cfg.paths.sft_log)
    train_rows = [r for r in log if r.get("loss") is not None]
    evals = [r for r in log if r.get("kind") == "eval"]
    assert len(train_rows) == res.global_step and len(evals) >= res.global_step // 2
    assert all("loss" not in r and r["eval_loss"] > 0 for r in evals)
    assert [r["step"] for r in evals] == sorted(r["step"] for r in evals)
    marker = json.loads((res.checkpoint / models.MARKER).read_text())
    assert marker["eval_loss"] == pytest.approx(evals[-1]["eval_loss"]) and not marker["stopped_by_time_budget"]
    fig = charts.sft_loss_chart(log)
    assert "held-out slice" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


@pytest.mark.slow
def test_a_time_budget_stops_training_and_keeps_the_adapter(run_dir):
    cfg = make_cfg(run_dir, 8, epochs=50, time_budget_s=1e-3, save_steps=100)
    res = train_sft(cfg, echo=lambda s: None)
    marker = json.loads((res.checkpoint / models.MARKER).read_text())
    assert models.checkpoint_complete(res.checkpoint) and marker["stopped_by_time_budget"]
    assert res.global_step == 1 < marker["planned_steps"]  # the first step already spent the budget
    # a later session counts what the earlier ones spent
    assert spent_before(cfg.paths.sft_log, 2) == pytest.approx(read_jsonl(cfg.paths.sft_log)[-1]["elapsed_s"])
