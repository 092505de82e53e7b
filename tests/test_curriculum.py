"""The adaptive L1 -> L2 schedule: stays, triggers, ramps monotonically, never overshoots,
falls back on an empty side, and resumes exactly."""

from __future__ import annotations

import json
import random

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.train.rl.curriculum import (
    Curriculum,
    CurriculumSettings,
    p_level2_at,
    read_curriculum_log,
    schedule_preview,
    update_running_rate,
)

S = CurriculumSettings(start_p=0.1, end_p=0.5, trigger=0.4, ramp_steps=4)


def results(level: int, correct: int, total: int):
    return [(level, True)] * correct + [(level, False)] * (total - correct)


def test_settings_come_from_the_run_config():
    cfg = load_config("cpu")
    s = CurriculumSettings.from_config(cfg.rl)
    assert (s.start_p, s.end_p, s.trigger, s.ramp_steps) == (0.1, 0.5, 0.4, cfg.rl.curriculum_ramp_steps)


def test_before_the_trigger_p_stays_at_start():
    cur = Curriculum(S)
    for _ in range(20):
        assert cur.p_level2 == pytest.approx(0.1)
        rec = cur.update(results(1, 4, 10))  # 0.4 is not "passing" 0.4
    assert rec.triggered_at is None
    assert cur.state.running_l1_rate == pytest.approx(0.4)
    assert cur.p_level2 == pytest.approx(0.1)


def test_ema_definition():
    assert update_running_rate(None, 0.8, 0.5) == 0.8  # first observation initialises
    assert update_running_rate(0.8, 0.0, 0.5) == pytest.approx(0.4)
    assert update_running_rate(0.4, None, 0.5) == 0.4  # a step without L1 samples keeps it
    cur = Curriculum(S)
    cur.update(results(1, 2, 10))  # 0.2
    cur.update(results(1, 6, 10))  # 0.5*0.2 + 0.5*0.6 = 0.4: not above the trigger
    assert cur.state.triggered_at is None
    cur.update(results(2, 9, 10))  # only L2 samples: the L1 rate stays 0.4
    assert cur.state.running_l1_rate == pytest.approx(0.4)
    cur.update(results(1, 5, 10))  # 0.45 > 0.4: fires at step 3
    assert cur.state.triggered_at == 3


def test_crossing_then_monotone_ramp_to_end_and_never_beyond():
    cur = Curriculum(S)
    ps = []
    rates = [0.0, 0.1, 0.9, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for r in rates:
        ps.append(cur.p_level2)
        cur.update(results(1, round(r * 10), 10))
    # step 0: 0.0; step 1: 0.05; step 2: 0.475 > 0.4 fires -> step 3 starts the ramp
    assert cur.state.triggered_at == 2
    assert ps[:3] == [pytest.approx(0.1)] * 3
    assert ps[3:7] == [pytest.approx(0.2), pytest.approx(0.3), pytest.approx(0.4), pytest.approx(0.5)]
    # once triggered the ramp does not go back, even though the L1 rate collapsed
    assert all(p == pytest.approx(0.5) for p in ps[6:])
    assert all(b >= a - 1e-12 for a, b in zip(ps, ps[1:]))
    assert max(ps) <= 0.5 + 1e-12


@pytest.mark.parametrize("start,end,ramp", [(0.1, 0.5, 10), (0.1, 0.5, 1), (0.1, 0.5, 0), (0.0, 1.0, 7),
                                            (0.6, 0.2, 3), (0.3, 0.3, 5)])
def test_schedule_bounds_for_any_settings(start, end, ramp):
    s = CurriculumSettings(start_p=start, end_p=end, trigger=0.4, ramp_steps=ramp)
    lo, hi = min(start, end), max(start, end)
    ps = [p_level2_at(step, 5, s) for step in range(0, 40)]
    assert all(lo - 1e-12 <= p <= hi + 1e-12 for p in ps)
    assert ps[5] == pytest.approx(start)
    assert ps[-1] == pytest.approx(end)
    diffs = [b - a for a, b in zip(ps, ps[1:])]
    assert all(d * (end - start) >= -1e-12 for d in diffs)  # monotone towards end_p
    if ramp == 0:
        assert ps[6] == pytest.approx(end)


def test_schedule_preview_matches_the_docstring_rule():
    ps = schedule_preview(CurriculumSettings(ramp_steps=10), [0.5] + [0.0] * 12)
    assert ps[0] == pytest.approx(0.1)
    assert ps[1] == pytest.approx(0.14)
    assert ps[11] == pytest.approx(0.5)
    assert ps[12] == pytest.approx(0.5)


def test_sample_levels_follow_p_and_are_seeded():
    cur = Curriculum(S, seed=3)
    levels = cur.sample_levels(4000)
    assert 0.08 < levels.count(2) / 4000 < 0.12
    assert levels == Curriculum(S, seed=3).sample_levels(4000)
    assert levels != Curriculum(S, seed=4).sample_levels(4000)


def pool():
    return {1: [f"l1-{i}" for i in range(6)], 2: [f"l2-{i}" for i in range(4)], 3: ["l3-0"]}


def test_sample_tasks_without_replacement_and_level3_on_the_hard_side():
    s = CurriculumSettings(start_p=0.5, end_p=0.5, trigger=0.4, ramp_steps=0)
    cur = Curriculum(s, seed=0)
    drawn = cur.sample_tasks(pool(), 11)
    assert len(drawn) == 11 and all(t in sum(pool().values(), []) for t in drawn)
    # within a side, no repeat until the side is exhausted
    l1 = [t for t in drawn if t.startswith("l1")]
    assert len(set(l1)) == min(len(l1), 6)
    hard = [t for t in drawn if not t.startswith("l1")]
    assert len(set(hard)) == min(len(hard), 5)


def test_empty_side_falls_back_and_is_logged(tmp_path):
    log = tmp_path / "curriculum.jsonl"
    s = CurriculumSettings(start_p=0.9, end_p=0.9, trigger=0.4, ramp_steps=0)
    cur = Curriculum(s, seed=1, log_path=log)
    only_l1 = cur.sample_tasks({1: ["a", "b"]}, 5)
    assert all(t in ("a", "b") for t in only_l1)
    rec = cur.update(results(1, 1, 5))
    assert rec.fallback == "no level-2 tasks" and rec.n_level1 == 5 and rec.n_level2 == 0
    only_l2 = cur.sample_tasks({1: [], 2: ["x"]}, 3)
    assert only_l2 == ["x", "x", "x"]
    assert cur.update([]).fallback == "no level-1 tasks"
    with pytest.raises(ValueError, match="empty"):
        cur.sample_tasks({1: [], 2: []}, 2)
    assert [r["fallback"] for r in read_curriculum_log(log)] == ["no level-2 tasks", "no level-1 tasks"]


def simulate(cur: Curriculum, steps: range, rate_rng_seed: int = 7):
    """Drive the curriculum like a trainer: draw tasks, 'verify' with L1 rates rising over time."""
    out = []
    for step in steps:
        tasks = cur.sample_tasks(pool(), 8)
        rng = random.Random(f"{rate_rng_seed}:{step}")
        res = []
        for t in tasks:
            level = 1 if t.startswith("l1") else 2
            res += [(level, rng.random() < min(0.9, 0.1 * step)) for _ in range(4)]
        out.append((tasks, cur.update(res).to_dict()))
    return out


def test_log_has_one_record_per_step(tmp_path):
    log = tmp_path / "c.jsonl"
    cur = Curriculum(S, seed=5, log_path=log)
    simulate(cur, range(6))
    recs = read_curriculum_log(log)
    assert [r["step"] for r in recs] == list(range(6))
    assert set(recs[0]) >= {"step", "p_level2", "running_l1_rate", "triggered_at", "n_level1", "n_level2"}


def test_resume_equals_uninterrupted(tmp_path):
    full_log = tmp_path / "full.jsonl"
    full = simulate(Curriculum(S, seed=5, log_path=full_log), range(12))
    assert any(r["triggered_at"] is not None for _, r in full), "the simulation should cross the trigger"

    log = tmp_path / "killed.jsonl"
    part = simulate(Curriculum(S, seed=5, log_path=log), range(7))
    # a kill mid-append leaves a torn line
    with log.open("a") as f:
        f.write('{"step": 7, "p_lev')
    resumed = Curriculum.resume(S, 5, log)
    assert resumed.step == 7
    rest = simulate(resumed, range(7, 12))
    assert [t for t, _ in part + rest] == [t for t, _ in full]
    assert read_curriculum_log(log) == read_curriculum_log(full_log)


def test_resume_cuts_steps_of_an_unfinished_round(tmp_path):
    log = tmp_path / "c.jsonl"
    simulate(Curriculum(S, seed=2, log_path=log), range(5))
    cur = Curriculum.resume(S, 2, log, upto_step=3)  # round 3 was logged but never finished
    assert cur.step == 3
    assert [r["step"] for r in read_curriculum_log(log)] == [0, 1, 2]
    ref = Curriculum(S, seed=2)
    simulate(ref, range(3))
    assert cur.state == ref.state


def test_out_of_order_log_is_a_clear_error(tmp_path):
    log = tmp_path / "c.jsonl"
    log.write_text(json.dumps({"step": 1, "running_l1_rate": 0.2, "triggered_at": None}) + "\n")
    with pytest.raises(ValueError, match="out of order"):
        Curriculum.resume(S, 0, log)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="between 0 and 1"):
        CurriculumSettings(start_p=1.5)
    with pytest.raises(ValueError, match="ramp_steps"):
        CurriculumSettings(ramp_steps=-1)


# --------------------------------------------------------------------------- the frontier


def frontier_settings(**kw):
    return CurriculumSettings(start_p=0.0, end_p=0.0, trigger=1.0, ramp_steps=0, frontier=True, **kw)


def test_frontier_draws_tasks_the_policy_sometimes_solves_most():
    from tritonrl_lib.train.rl.curriculum import frontier_weight, success_estimate

    assert success_estimate(0, 0) == 0.5
    assert frontier_weight(5, 5, 0.05) > frontier_weight(0, 20, 0.05) > 0  # never solved: drawn, but rarely
    assert frontier_weight(5, 5, 0.05) > frontier_weight(20, 0, 0.05)
    pool = {1: [f"t{i}" for i in range(10)]}
    cur = Curriculum(frontier_settings(frontier_decay=1.0))
    # t0 .. t4 never solved in 30 samples, t5 .. t9 solved half the time
    cur.update([], task_results={**{f"t{i}": (30, 0) for i in range(5)}, **{f"t{i}": (30, 15) for i in range(5, 10)}})
    counts = {t: 0 for t in pool[1]}
    for step in range(400):
        for t in cur.sample_tasks(pool, 2, rng=random.Random(step)):
            counts[t] += 1
    hard = sum(counts[f"t{i}"] for i in range(5))
    frontier = sum(counts[f"t{i}"] for i in range(5, 10))
    assert frontier > 4 * hard > 0
    assert cur.task_success("t7") == pytest.approx(15.5 / 31)


def test_without_the_frontier_draws_are_uniform_and_unchanged():
    pool = {1: [f"t{i}" for i in range(6)], 2: ["u0", "u1"]}
    a, b = Curriculum(S, seed=3), Curriculum(S, seed=3)
    b.update([], task_results={"t0": (10, 0)})  # observed counts do not matter without the frontier
    b.state.step = 0
    assert a.sample_tasks(pool, 4, rng=a.rng(5)) == b.sample_tasks(pool, 4, rng=b.rng(5))


def test_task_counts_decay_and_are_rebuilt_on_resume(tmp_path):
    log = tmp_path / "curriculum.jsonl"
    cur = Curriculum(frontier_settings(frontier_decay=0.5), seed=1, log_path=log)
    cur.sample_tasks({1: ["a", "b"]}, 2, rng=cur.rng(0))
    cur.update(results(1, 2, 4), task_results={"a": (2, 2), "b": (2, 0)})
    cur.update(results(1, 0, 2), task_results={"a": (2, 0)})
    assert cur.task_counts["a"] == [1.0, 2.0] and cur.task_counts["b"] == [0.0, 2.0]
    back = Curriculum.resume(cur.settings, 1, log)
    assert back.task_counts == cur.task_counts and back.step == 2
    cut = Curriculum.resume(cur.settings, 1, log, upto_step=1)
    assert cut.task_counts == {"a": [2.0, 0.0], "b": [0.0, 2.0]}


def test_redraw_avoids_the_step_tasks_and_is_counted(tmp_path):
    cur = Curriculum(frontier_settings(), seed=2, log_path=tmp_path / "c.jsonl")
    pool = {1: ["a", "b", "c", "d"]}
    first = cur.sample_tasks(pool, 2, rng=cur.rng(0))
    again = cur.redraw(pool, 2, avoid=first)
    assert set(again) == set(pool[1]) - set(first)
    rec = cur.update(results(1, 1, 4))
    assert rec.redrawn == 2 and rec.n_level1 == 2
    assert read_curriculum_log(tmp_path / "c.jsonl")[0]["redrawn"] == 2
    small = Curriculum(frontier_settings())
    small.sample_tasks({1: ["a"]}, 1)
    assert small.redraw({1: ["a"]}, 1, avoid=["a"]) == ["a"]  # nothing else to draw: the same task again
