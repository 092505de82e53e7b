"""What makes an RL step learn on the tiny model with the real verifier pool: identical code
verified once (and in the background), refinement turns that carry the verifier's feedback, and
groups without signal redrawn (dynamic sampling), all visible in the step's log."""

from __future__ import annotations

import pytest

from tritonrl_lib.report import charts
from tritonrl_lib.train.rl.curriculum import read_curriculum_log
from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.model.load import load_tokenizer
from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.train.rl.best_of_n import train_best_of_n
from tritonrl_lib.train.rl.refine import discounted_reward, feedback_text, refinement_messages, refinement_prompt
from tritonrl_lib.train.rl.log import read_rl_log, rl_table
from tritonrl_lib.verify.batch import SHARED_NOTE, VerifyAhead, verify_unique
from tritonrl_lib.verify.pool import VerifierPool

from rl_fixtures import prepare_run, smoke_config


class CountingPool(VerifierPool):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sent = 0

    def map(self, tasks, completions, **kw):
        self.sent += len(completions)
        return super().map(tasks, completions, **kw)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = CountingPool(smoke_config(tmp_path_factory.mktemp("pool")).verify, progress=False)
    yield p
    p.close()


@pytest.fixture(scope="module")
def suite():
    return {t.id: t for t in load_tasks("builtin", size="small")}


@pytest.mark.slow
def test_identical_code_is_verified_once_and_copies_keep_their_own_verdict(pool, suite):
    relu, add = suite["builtin/L1/relu"], suite["builtin/L1/add"]
    good = format_completion(relu.reference_solution)
    same_code = format_completion(relu.reference_solution, "Here it is again.")
    other = format_completion(add.reference_solution)
    tasks = [relu, relu, relu, add, relu]
    texts = [good, same_code, other, other, "no code at all"]
    before = pool.sent
    verdicts, stats = verify_unique(pool, tasks, texts)
    assert pool.sent - before == 4 and (stats.candidates, stats.unique, stats.duplicates) == (5, 4, 1)
    assert [v.correct for v in verdicts] == [True, True, False, True, False]  # add's code is wrong for relu
    assert SHARED_NOTE in verdicts[1].notes and SHARED_NOTE not in verdicts[0].notes
    verdicts[1].notes.append("edited")
    assert "edited" not in verdicts[0].notes  # a copy, not the same object
    with VerifyAhead(pool) as ahead:
        ahead_verdicts, ahead_stats = ahead.submit(tasks, texts).result()
    assert [v.to_dict()["reason"] for v in ahead_verdicts] == [v.reason for v in verdicts]
    assert ahead_stats.unique == 4 and stats.to_dict()["per_minute"] > 0


@pytest.mark.slow
def test_feedback_names_the_verdict_and_the_conversation_holds_the_attempt(pool, suite):
    relu = suite["builtin/L1/relu"]
    broken = format_completion(relu.reference_solution.replace("x > 0, x, 0.0", "x < 0, x, 0.0"))
    verdict = verify_unique(pool, [relu], [broken])[0][0].to_dict()
    assert not verdict["correct"]
    text = feedback_text(verdict)
    assert verdict["reason"] in text and f"`{verdict['stage']}`" in text and "```python" in text
    long = feedback_text({"stage": "compile", "reason": "compile_error", "error": "z" * 5000})
    assert "did not import" in long and len(long) < 1000 and 500 < long.count("z") <= 600
    msgs = refinement_messages(relu, [(broken, verdict)])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == broken.strip() and msgs[3]["content"] == text
    tok = load_tokenizer("tiny")
    prompt = refinement_prompt(tok, relu, [(broken, verdict)])
    assert "x < 0, x, 0.0" in prompt and verdict["reason"] in prompt
    with pytest.raises(ValueError):
        refinement_messages(relu, [])


def test_feedback_keeps_where_it_failed_and_the_exception_of_a_long_traceback():
    frames = "".join(f'  File "/tmp/cand/tritonrl_candidate.py", line {i}, in forward\n    y = f{i}(x)\n'
                     for i in range(60))
    error = ("on the tiny inputs:\nTraceback (most recent call last):\n" + frames +
             "NameError: name 'outer' is not defined. Did you mean: 'iter'?")
    assert len(error) > 3000
    text = feedback_text({"stage": "compile", "reason": "runtime_error", "error": error})
    assert "on the tiny inputs:" in text and "NameError: name 'outer' is not defined" in text
    assert len(text) < 1000 and "\n" not in text.split("Error: ", 1)[1].split("\nFix it.")[0]


def test_a_refined_trajectory_earns_its_best_discounted_turn():
    assert discounted_reward([0.7], 0.8) == 0.7
    assert discounted_reward([0.3, 0.7], 0.8) == pytest.approx(0.56)  # fixed on turn 2: below right at once
    assert discounted_reward([0.5, 0.0], 0.8) == 0.5  # a worse refinement never lowers it
    with pytest.raises(ValueError):
        discounted_reward([], 0.8)


def reference_for_relu_only(task, round_index):
    """Correct candidates for relu; none for the other tasks, whose groups then carry no signal."""
    return [format_completion(task.reference_solution)] if task.id == "builtin/L1/relu" else []


@pytest.mark.slow
def test_groups_without_signal_are_redrawn_and_failures_are_refined(tmp_path, pool):
    cfg = smoke_config(tmp_path, rl_tasks="builtin/L1/relu,builtin/L1/add,builtin/L1/abs,builtin/L1/square",
                       tasks_per_round=2, n_samples=2, redraw_rounds=1, refine_turns=1, overlap_chunks=2)
    prepare_run(cfg)
    res = train_best_of_n(cfg, pool=pool, extra_candidates=reference_for_relu_only)
    assert res.status == "trained"
    rec = read_rl_log(cfg.paths)[0]
    sig = rec["signal"]
    first = len(rec["tasks"])
    assert sig["groups"] == 2 and sig["rule"] == "a correct candidate to keep"
    dead = sig["groups"] - sig["first_draw_with_signal"]
    assert dead >= 1  # at most relu's group has a correct candidate
    assert sig["drawn"] == 2 + dead and sig["redraw_rounds"] == (1 if dead else 0)
    assert sig["with_signal"] == sig["first_draw_with_signal"] + sig["replaced"]
    # refinement: every failed policy sample was written again once, with the verdict as feedback
    cands = read_jsonl(cfg.paths.rl_round(0).samples)
    policy_first = [c for c in cands if c["turn"] == 0 and not c["injected"]]
    refined = [c for c in cands if c["turn"] == 1]
    failed = [c for c in policy_first if not c["verdict"]["correct"]]
    assert len(refined) == len(failed) == rec["refine"]["refined"] and rec["refine"]["turns"] == 1
    assert all(r["history"][0][0] == next(c["text"] for c in failed if f"{c['group']}:{c['sample_index']}"
                                          == r["parent"]) for r in refined)
    # timing and speed of the step are logged, and the table shows them
    t = rec["timing"]
    assert t["generate_s"] > 0 and t["refine_generate_s"] > 0 and t["train_s"] > 0
    assert t["step_s"] >= t["collect_s"] >= t["generate_s"]
    assert rec["verify"]["candidates"] == len(cands) and rec["verify"]["unique"] <= len(cands)
    assert "signal" in rl_table(cfg.paths) and f"{sig['with_signal']}/2" in rl_table(cfg.paths)
    # notebook 03's and the report's figure: one round is not a curve; two rounds of these records are
    assert "one best-of-N round" in charts.rl_chart([rec]).reason
    fig = charts.rl_chart([rec, {**rec, "round": 1}])
    time_split, signal = fig.axes[1:]  # beside the curves: where the time went, groups with signal
    assert time_split.containers[2].patches[0].get_height() == pytest.approx(t["train_s"])
    assert [p.get_height() for p in signal.containers[1].patches] == [sig["with_signal"]] * 2
    cur = read_curriculum_log(cfg.paths.curriculum_log)[0]
    assert cur["redrawn"] == sig["drawn"] - first and sum(n for n, _ in cur["task_results"].values()) == 2 * sig["drawn"]


def test_a_kept_refinement_trains_in_its_conversation(suite):
    from tritonrl_lib.train.rl.best_of_n import select_top_k, training_rows

    relu = suite["builtin/L1/relu"]
    first = {"stage": "compile", "reason": "mismatch:original", "error": "values differ"}
    ok = {"correct": True, "reward": 0.7, "speedup": None}
    right_away = {"task_id": relu.id, "sample_index": 1, "turn": 0, "injected": False, "text": "B", "num_tokens": 9,
                  "verdict": ok}
    refined = {"task_id": relu.id, "sample_index": 0, "turn": 1, "injected": False, "text": "A", "num_tokens": 1,
               "verdict": ok, "history": [["broken", first]]}
    assert [c["text"] for c in select_top_k([refined, right_away], 2, discount=0.8)] == ["B", "A"]
    rows = training_rows([refined], {relu.id: relu})
    assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user", "assistant", "user"]
    assert rows[0]["prompt"][2]["content"] == "broken" and "mismatch:original" in rows[0]["prompt"][3]["content"]
    assert rows[0]["completion"] == [{"role": "assistant", "content": "A"}]

