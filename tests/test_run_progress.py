"""The runner's terminal view of a running notebook: its lines, its bars, its live logs."""

from __future__ import annotations

import io
import json
import time

from tritonrl_lib.run.progress import StepMonitor, describe_bar, describe_record


def test_bars_are_recognised_and_compacted():
    text, done, count = describe_bar("rollout:  25%|██▌       | 1/4 [00:01<00:04,  1.37s/seq]")
    assert text == "rollout: 1/4 (25%) [00:01<00:04,  1.37s/seq]" and not done and count == "rollout: 1/4"
    assert describe_bar("verify sft: 100%|██████████| 40/40 [00:09<00:00, 4.1cand/s]")[1]
    assert describe_bar("SFT: resuming from checkpoint-2 (step 2)") is None
    assert describe_record("sft_log", {"step": 12, "epoch": 0.5, "loss": 1.23456, "lr": 1e-4}) == \
        "sft_log: step 12, epoch 0.50, loss 1.235"


def test_on_a_terminal_the_bar_is_one_line_redrawn_and_lines_scroll_above_it():
    term, lines = io.StringIO(), []
    with StepMonitor(lines.append, live=True, terminal=term) as mon:
        mon.stdout.write("RL: resuming after round 1 of 3\nround 2: ")
        mon.stderr.write("\rrollout:   0%|          | 0/4 [00:00<?, ?seq/s]")
        mon.stderr.write("\rrollout:  50%|█████     | 2/4 [00:01<00:01, 2.0seq/s]")
        mon.stdout.write("4 samples\n")
    assert lines == ["      RL: resuming after round 1 of 3", "      round 2: 4 samples"]
    drawn = term.getvalue()
    assert "\r\x1b[K      [0m 00s] rollout: 2/4 (50%)" in drawn and drawn.endswith("\r\x1b[K")  # cleared at the end


def test_a_silent_notebook_still_shows_it_is_running():
    term, lines = io.StringIO(), []
    with StepMonitor(lines.append, live=True, terminal=term):
        time.sleep(2.5)  # the clock ticks on the live line
    assert "[0m 02s] running" in term.getvalue()
    lines = []
    with StepMonitor(lines.append, live=False, quiet_s=1.0) as mon:
        mon.status("rollout: 1/4 (25%)")
        time.sleep(2.5)
    assert any(x.startswith("      (still running, 0m 0") and "last progress: rollout: 1/4 (25%)" in x for x in lines)


def test_a_live_log_becomes_the_status_as_records_arrive(tmp_path):
    log = tmp_path / "sft_log.jsonl"
    lines = []
    with StepMonitor(lines.append, live=False, watch=[("sft_log", log)], every_s=0.0):
        log.write_text(json.dumps({"step": 1, "loss": 2.0}) + "\n")
        time.sleep(2.5)
    assert "      sft_log: step 1, loss 2.000" in lines


def test_a_printed_line_that_counts_steps_is_also_the_latest_progress():
    """SFT prints `SFT step i/n ...` lines: each shows as a line, and the quiet-time line names the latest."""
    lines = []
    with StepMonitor(lines.append, live=False, quiet_s=1.0) as mon:
        mon.stdout.write("SFT: 12 examples\nSFT step 3/12 (epoch 1 of 1): loss 1.623, 38.2 s/step, about 5m 44s left\n")
        time.sleep(2.5)
    assert lines[:2] == ["      SFT: 12 examples",
                         "      SFT step 3/12 (epoch 1 of 1): loss 1.623, 38.2 s/step, about 5m 44s left"]
    assert any(x.startswith("      (still running, ") and x.endswith("last progress: SFT step 3/12 (epoch 1 of 1): "
                                                                      "loss 1.623, 38.2 s/step, about 5m 44s left)")
               for x in lines[2:]), lines


def test_no_step_is_silent_for_more_than_30_seconds_by_default():
    import inspect

    defaults = inspect.signature(StepMonitor).parameters
    assert defaults["quiet_s"].default <= 25.0 and defaults["every_s"].default <= 30.0
