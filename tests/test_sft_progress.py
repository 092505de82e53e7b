"""SFT's progress lines (train/sft/log.py): a real transformers Trainer on a tiny model prints which step
of how many, the loss, a rate and the time left as it trains, says when one step runs long, and stops
talking when training ends or raises."""

from __future__ import annotations

import re
import time

import pytest
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from tritonrl_lib.train.sft.log import JsonlLogCallback, duration, progress_line

pytestmark = pytest.mark.timeout(300)

LINE = re.compile(r"^SFT step (\d+)/(\d+) \(epoch (\d+) of 2\): loss [\d.]+, [\d.]+ (s/step|steps/s), about .+ left$")


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(4, 1)

    def forward(self, x, y):
        return {"loss": torch.nn.functional.mse_loss(self.w(x).squeeze(-1), y)}


class _Rows(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i)), "y": torch.tensor(float(i % 3))}


class _Slow(TrainerCallback):
    """Step `at` takes `seconds`; with `fail`, it raises instead of finishing."""

    def __init__(self, at: int, seconds: float, fail: bool = False):
        self.at, self.seconds, self.fail = at, seconds, fail

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.at:
            time.sleep(self.seconds)
            if self.fail:
                raise RuntimeError("training broke on purpose")


def _train(tmp_path, *callbacks, logging_steps=1):
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_train_epochs=2,
                             logging_steps=logging_steps, save_strategy="no", report_to="none", use_cpu=True,
                             disable_tqdm=True, learning_rate=0.01)
    Trainer(model=_Tiny(), args=args, train_dataset=_Rows(), callbacks=list(callbacks)).train()


def test_every_step_says_where_training_is_how_fast_and_how_long_is_left(tmp_path):
    lines: list[str] = []
    log = JsonlLogCallback(tmp_path / "sft_log.jsonl", 1, echo=lines.append, every_s=0.0, quiet_s=60.0)
    _train(tmp_path, log)
    steps = [LINE.match(x) for x in lines]
    assert all(steps), lines
    assert [(int(m[1]), int(m[2]), int(m[3])) for m in steps] == [(i, 8, 1 if i <= 4 else 2) for i in range(1, 9)]
    assert lines[-1].endswith("about 0 s left")
    assert len(log.records) == 8  # the log itself is as before: one record per logged step


def test_between_logging_steps_and_throttled_lines_the_first_and_last_steps_still_show(tmp_path):
    lines: list[str] = []
    _train(tmp_path, JsonlLogCallback(tmp_path / "sft_log.jsonl", 1, echo=lines.append, every_s=3600.0, quiet_s=60.0),
           logging_steps=3)
    assert [x.split(" (")[0] for x in lines] == ["SFT step 1/8", "SFT step 8/8"], lines
    assert "loss" not in lines[0] and "left" in lines[0]  # step 1 logged no loss (logging every 3 steps)


def test_a_long_step_is_announced_while_it_runs(tmp_path):
    lines: list[str] = []
    log = JsonlLogCallback(tmp_path / "sft_log.jsonl", 1, echo=lines.append, every_s=0.0, quiet_s=1.0)
    _train(tmp_path, log, _Slow(at=3, seconds=3.5))
    still = [x for x in lines if "still running" in x]
    assert still and all(x.startswith("SFT step 3/8 still running (") for x in still), lines
    assert "s/step until now, about" in still[-1]
    assert lines.index(still[0]) > lines.index(next(x for x in lines if x.startswith("SFT step 2/8 ")))
    assert lines[-1].startswith("SFT step 8/8 ")


def test_still_running_lines_do_not_hold_back_the_line_of_the_step_they_announced(tmp_path):
    lines: list[str] = []
    log = JsonlLogCallback(tmp_path / "sft_log.jsonl", 1, echo=lines.append, every_s=2.0, quiet_s=1.0)
    _train(tmp_path, log, _Slow(at=3, seconds=3.5))
    last_still = max(i for i, x in enumerate(lines) if x.startswith("SFT step 3/8 still running"))
    assert lines[last_still + 1].startswith("SFT step 3/8 (epoch 1 of 2): loss "), lines


def test_a_training_that_raises_falls_silent(tmp_path):
    lines: list[str] = []
    log = JsonlLogCallback(tmp_path / "sft_log.jsonl", 1, echo=lines.append, every_s=0.0, quiet_s=1.0)
    with pytest.raises(RuntimeError, match="on purpose"):
        _train(tmp_path, log, _Slow(at=2, seconds=0.0, fail=True))
    said = len(lines)
    time.sleep(3.0)  # the heartbeat would have spoken twice by now
    assert len(lines) == said and not (log._beat and log._beat.is_alive())


def test_the_words_of_a_line():
    assert progress_line(3, 12, 0.25, 1, 1.6234, 38.2, 107.4, 344) == \
        "SFT step 3/12 (epoch 1 of 1): loss 1.623, 38.2 s/step, 107 tokens/s, about 5m 44s left"
    assert progress_line(340, 624, 3.27, 6, None, 0.47, 68000, 135) == \
        "SFT step 340/624 (epoch 4 of 6): 2.1 steps/s, 68,000 tokens/s, about 2m 15s left"
    assert duration(42) == "42 s" and duration(3725) == "1h 02m"
