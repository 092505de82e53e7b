"""RL's time budget (`rl_time_budget_s`, train/rl/time_budget.py): a call stops between rounds or steps
when the next would end past the budget, leaves the last finished one's adapter in checkpoints/rl, marked
stopped, and a later call goes on from there to the end (the budget is not part of the run's fingerprint)."""

from __future__ import annotations

import json

import pytest

from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.model import load as models
from tritonrl_lib.train.rl.best_of_n import reference_candidates, train_best_of_n
from tritonrl_lib.train.rl.curriculum import read_curriculum_log
from tritonrl_lib.train.rl.distributed import SINGLE
from tritonrl_lib.train.rl.grpo import train_grpo
from tritonrl_lib.train.rl.log import read_rl_log
from tritonrl_lib.train.rl.run_frame import fingerprint
from tritonrl_lib.train.rl.time_budget import STOPPED, StepBudget

from rl_fixtures import pool, prepare_run, smoke_config  # noqa: F401 (pool: a fixture)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_step_starts_only_when_one_as_long_as_the_longest_yet_still_fits():
    clock = Clock()
    b = StepBudget(60, SINGLE, clock=clock)
    clock.t += 10  # loading the model counts
    assert b.another_fits()  # nothing measured yet: the first step always runs
    clock.t += 20
    b.step_done()  # a step of 20 s (and the 10 s before it): 30 s spent
    assert b.longest == 30 and b.another_fits()  # 30 + 30 <= 60
    clock.t += 5
    b.step_done()  # a short step does not lower the estimate
    assert b.longest == 30 and not b.another_fits()  # 35 + 30 > 60
    clock.t += 1
    b.step_done(counts=False)  # a round read back from disk: no estimate of a real one
    assert b.longest == 30
    assert "stops after 2 of 5 rounds" in b.words(2, 5, "rounds")
    assert StepBudget(0, SINGLE, clock=clock).another_fits()  # 0: no budget


def test_the_budget_is_checked_and_left_out_of_the_runs_fingerprint(tmp_path):
    with pytest.raises(ConfigError, match="rl_time_budget_s=-1"):
        load_config("smoke", overrides={"rl_time_budget_s": -1})
    a = smoke_config(tmp_path, rl_time_budget_s=30)
    b = smoke_config(tmp_path)
    sft = tmp_path / "no-adapter"
    assert fingerprint(a, "grpo", sft, ["t"]) == fingerprint(b, "grpo", sft, ["t"])


def _marker(path) -> dict:
    return json.loads((path / models.MARKER).read_text())


def _stopped_marker(paths) -> dict:
    """The adapter a budget-stopped call left: complete, marked stopped, not final."""
    marker = _marker(paths.rl_checkpoint)
    assert models.checkpoint_complete(paths.rl_checkpoint)
    assert marker["stopped"] == STOPPED and not marker["final"]
    return marker


@pytest.mark.slow
def test_best_of_n_stops_between_rounds_and_a_new_call_goes_on(tmp_path, pool):
    # a budget far shorter than a round: the first round runs, the second would not fit
    cfg = smoke_config(tmp_path, rounds=3, n_samples=2, tasks_per_round=2, rl_time_budget_s=0.001)
    prepare_run(cfg)
    paths = cfg.paths
    res = train_best_of_n(cfg, pool=pool, extra_candidates=reference_candidates)
    assert res.status == STOPPED and res.rounds_done == 1
    assert [r["round"] for r in read_rl_log(paths)] == [0]
    assert _stopped_marker(paths)["round"] == 0
    first_draw = read_rl_log(paths)[0]["tasks"]

    again = train_best_of_n(smoke_config(tmp_path, rounds=3, n_samples=2, tasks_per_round=2), pool=pool,
                            extra_candidates=reference_candidates)
    assert again.status == "resumed" and again.rounds_done == 3
    log = read_rl_log(paths)
    assert [r["round"] for r in log] == [0, 1, 2] and log[0]["tasks"] == first_draw
    assert [c["step"] for c in read_curriculum_log(paths.curriculum_log)] == [0, 1, 2]
    marker = _marker(paths.rl_checkpoint)
    assert marker["final"] and marker["round"] == 2 and "stopped" not in marker


@pytest.mark.slow
def test_best_of_n_budgets_the_scoring_pass_too(tmp_path, pool):
    cfg = smoke_config(tmp_path, rounds=1, n_samples=2, tasks_per_round=2, rl_time_budget_s=0.001)
    prepare_run(cfg)
    res = train_best_of_n(cfg, pool=pool, extra_candidates=reference_candidates, score_final=True)
    assert res.status == STOPPED and res.rounds_done == 1
    marker = _marker(cfg.paths.rl_checkpoint)
    assert marker["final"] and "stopped" not in marker and not marker.get("scored")  # trained, not yet scored
    again = train_best_of_n(smoke_config(tmp_path, rounds=1, n_samples=2, tasks_per_round=2), pool=pool,
                            extra_candidates=reference_candidates, score_final=True)
    assert again.status == "resumed" and _marker(cfg.paths.rl_checkpoint).get("scored")
    assert [(r["round"], r["scoring_only"]) for r in read_rl_log(cfg.paths)] == [(0, False), (1, True)]


@pytest.mark.slow
def test_grpo_stops_after_a_step_with_its_checkpoint_and_a_new_call_resumes(tmp_path, pool):
    # 20 steps: the Trainer saves every 2nd, so checkpoint-1 exists only because the stop saved it
    over = dict(method="grpo", grpo_steps=20, n_samples=2, tasks_per_round=2, rl_time_budget_s=0.001)
    cfg = smoke_config(tmp_path, **over)
    prepare_run(cfg)
    paths = cfg.paths
    res = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates)
    assert res.status == STOPPED and res.rounds_done == 1
    assert [r["step"] for r in read_rl_log(paths)] == [0]
    assert _stopped_marker(paths)["steps"] == 1
    assert (paths.rl_checkpoint / "checkpoint-1").is_dir()  # saved at the stop: the next call resumes from it

    lines: list[str] = []
    again = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates, echo=lines.append)
    assert any("resuming from checkpoint-1" in x for x in lines)
    assert again.status == STOPPED and again.rounds_done == 2  # the call's first step always runs
    assert [r["step"] for r in read_rl_log(paths)] == [0, 1]
    assert _marker(paths.rl_checkpoint)["steps"] == 2 and (paths.rl_checkpoint / "checkpoint-2").is_dir()


@pytest.mark.slow
def test_a_budget_never_marks_the_last_step_stopped(tmp_path, pool):
    cfg = smoke_config(tmp_path, method="grpo", grpo_steps=1, n_samples=2, tasks_per_round=2, rl_time_budget_s=0.001)
    prepare_run(cfg)
    res = train_grpo(cfg, pool=pool, extra_candidates=reference_candidates)
    assert res.status == "trained" and res.rounds_done == 1
    marker = _marker(cfg.paths.rl_checkpoint)
    assert marker["final"] and "stopped" not in marker


def test_a_run_the_budget_stopped_is_unfinished_for_the_pipeline_and_the_report(tmp_path):
    from tritonrl_lib.core.jsonio import write_json
    from tritonrl_lib.report.text import rl_stopped_words, run_description
    from tritonrl_lib.run.state import step_of, step_settings, why_stale

    cfg = smoke_config(tmp_path, rl_time_budget_s=600)
    paths = cfg.paths.ensure()
    for step in ("03_rl", "04_eval", "05_report"):  # the budget is not a setting of what RL makes
        assert step_settings(cfg, step_of(step)) == step_settings(smoke_config(tmp_path), step_of(step))
    record = {"settings": step_settings(cfg, step_of("03_rl")), "inputs": {}, "outputs": {}}
    assert why_stale(cfg, paths, "03_rl", record=record) is None and rl_stopped_words(cfg) == ""
    paths.rl_checkpoint.mkdir(parents=True)
    write_json(paths.rl_checkpoint / models.MARKER, {"method": "best_of_n", "round": 2, "final": False,
                                                     "stopped": STOPPED})
    assert "stopped at its time budget (rl_time_budget_s) after 3 rounds" in why_stale(cfg, paths, "03_rl",
                                                                                      record=record)
    assert why_stale(cfg, paths, "04_eval", record={**record, "settings": step_settings(cfg, step_of("04_eval"))}) \
        is None  # only RL itself goes on
    assert "stopped by its time budget (rl_time_budget_s) after 3 rounds" in " ".join(run_description(cfg, {})[0])
