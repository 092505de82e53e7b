"""The training figures of charts.py, the one renderer notebooks 02/03 and the report share: what
each panel shows for logs as train/sft/log.py and train/rl/log.py write them."""

from __future__ import annotations

import pytest

from tritonrl_lib.report import charts as C


def _rl_record(i: int, *, timed: bool = True) -> dict:
    rec = {"method": "best_of_n", "round": i, "mean_reward": 0.1 * i, "correct_rate": 0.1 + 0.1 * i,
           "by_level": {"1": {"correct_rate": 0.2 * i}, "2": {"correct_rate": 0.05 * i}}}
    if timed:
        rec["timing"] = {"generate_s": 10.0, "refine_generate_s": 2.0, "verify_s": 8.0, "verify_wait_s": 1.5,
                         "train_s": 4.0}
        rec["signal"] = {"groups": 4, "with_signal": 3, "first_draw_with_signal": 2, "rule": "a correct candidate to keep"}
    return rec


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_the_trend_of_a_learning_curve():
    assert C.linear_trend([0, 1, 2, 3], [0.1, 0.2, 0.3, 0.4]) == pytest.approx((0.1, 0.1))
    assert C.linear_trend([0, 1, 2], [0.5, None, 0.3])[0] == pytest.approx(-0.1)
    assert C.linear_trend([0], [0.2]) is None and C.linear_trend([1, 1], [0.1, 0.2]) is None


def test_rl_chart_shows_curves_trend_time_split_and_signal():
    fig = C.rl_chart([_rl_record(i) for i in range(3)])
    curves, time_split, signal = fig.axes
    assert "correct-rate trend (+0.100 per round)" in _labels(curves)
    assert {"correct rate, Level 1", "correct rate, Level 2"} <= set(_labels(curves))
    # stacked bars: generate (writing + refinement) 12 s, verification waited for 1.5 s, the update 4 s
    heights = [[p.get_height() for p in c.patches] for c in time_split.containers]
    assert heights == [[12.0] * 3, [1.5] * 3, [4.0] * 3]
    assert time_split.containers[2].patches[0].get_y() == pytest.approx(13.5)
    assert "verifier busy (overlapped)" in _labels(time_split)
    assert [p.get_height() for p in signal.containers[1].patches] == [3, 3, 3]
    assert "a correct candidate to keep" in signal.get_title()
    C.png_bytes(fig)  # it renders


def test_rl_chart_without_timing_or_signal_is_one_panel():
    fig = C.rl_chart([_rl_record(i, timed=False) for i in range(2)])
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "round"


def test_sft_chart_draws_the_held_out_loss_and_marks_a_resume():
    rows = [{"step": 1, "loss": 2.0, "learning_rate": 1e-4, "session": 1},
            {"step": 2, "loss": 1.5, "learning_rate": 1e-4, "session": 1},
            {"step": 2, "eval_loss": 1.8, "kind": "eval", "session": 1},
            {"step": 3, "loss": 1.2, "learning_rate": 5e-5, "session": 2},
            {"step": 4, "loss": 1.0, "learning_rate": 0.0, "session": 2},
            {"step": 4, "eval_loss": 1.6, "kind": "eval", "session": 2}]
    fig = C.sft_loss_chart(rows)
    loss, lr = fig.axes
    assert _labels(loss) == ["training", "held-out slice"]
    held = next(line for line in loss.get_lines() if line.get_label() == "held-out slice")
    assert list(held.get_xdata()) == [2, 4] and list(held.get_ydata()) == [1.8, 1.6]
    resumed = [line for line in loss.get_lines() if line.get_linestyle() == ":"]
    assert len(resumed) == 1 and list(resumed[0].get_xdata()) == [3, 3]  # session 2 began at step 3
    assert loss.get_title() == "SFT loss: 2.000 -> 1.000"
    assert C.sft_loss_chart(rows[:2]).axes[0].get_legend() is None  # no held-out slice: one line, no legend


def test_tasks_drawn_again_show_their_change_beside_the_frontier_rate():
    from tritonrl_lib.train.rl.log import seen_before, verdict_stats
    from tritonrl_lib.verify.verdict import Verdict

    def verdicts(pattern: str) -> list[Verdict]:
        return [Verdict(task_id="t", correct=ch == "1", stage="full" if ch == "1" else "compile",
                        reward=1.0 if ch == "1" else 0.0) for ch in pattern]

    # round 0 draws a (1 of 4 right) and b (2 of 4); round 1 draws b again (4 of 4) and c (0 of 4);
    # round 2 a (3 of 4) and c (2 of 4): each round's rate stays mid-way, the repeated tasks rise
    draws = [{"a": "1000", "b": "1100"}, {"b": "1111", "c": "0000"}, {"a": "1110", "c": "1100"}]
    rows = []
    for i, d in enumerate(draws):
        ids = [t for t, p in d.items() for _ in p]
        vs = [v for p in d.values() for v in verdicts(p)]
        rows.append({"method": "best_of_n", "round": i, "mean_reward": 0.5,
                     **verdict_stats([1] * len(vs), vs, ids)})
    assert rows[1]["by_task"] == {"b": [4, 4], "c": [0, 4]}
    again = seen_before(rows)
    assert again[0] is None
    assert again[1] == {"tasks": 1, "first": 0.5, "now": 1.0}
    assert again[2] == {"tasks": 2, "first": pytest.approx((0.25 + 0.0) / 2), "now": pytest.approx((0.75 + 0.5) / 2)}
    assert seen_before([{k: v for k, v in r.items() if k != "by_task"} for r in rows]) == [None] * 3  # older logs

    curves = C.rl_chart(rows).axes[0]
    assert {"tasks drawn before: correct rate now", "the same tasks at their first draw"} <= set(_labels(curves))
    line = next(ln for ln in curves.get_lines() if ln.get_label() == "tasks drawn before: correct rate now")
    assert list(line.get_ydata())[1:] == [1.0, pytest.approx(0.625)]
    # a log without repeated tasks draws no such line
    assert "the same tasks at their first draw" not in _labels(C.rl_chart([_rl_record(i) for i in range(3)]).axes[0])
