"""The SFT training log: one JSON object per logging step in `paths.sft_log` (read with
jsonio.read_jsonl; charts.sft_loss_chart draws it for notebook 02 and the report).

A record: `step`, `epoch`, `loss`, `learning_rate`, `grad_norm`, `tokens_per_s` (real tokens, no
padding, summed over all GPUs, since the previous record), `num_tokens` (this session's running
total), `elapsed_s` (since this session's training began), `session` (1 for the first start, 2
after the first resume, ...), plus TRL's `entropy` and `mean_token_accuracy` when present.

With a held-out slice (`sft.eval_fraction`), its loss is logged as its own record beside the
training records: `step`, `epoch`, `eval_loss`, `elapsed_s`, `session`, `kind: "eval"` (no
`loss` key, so readers of the training loss skip it).

Across resumes the file is appended to; a resume first drops the records past the checkpoint it
resumes from (they are logged again), so every step appears once.

The same callback prints the training's progress as plain text lines, which a notebook's output,
`papermill --log-output` and `tritonrl run`'s terminal all show (the Trainer's own bar is an HTML
widget inside a notebook, which none of them relays):

    SFT step 3/12 (epoch 1 of 1): loss 1.623, 38.2 s/step, 107 tokens/s, about 5m 44s left

at most every `every_s` seconds (and for the first and last step), and, while one step takes
longer than `quiet_s`, a line saying that it is still running: training is never silent for
longer than that.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from tqdm import tqdm
from transformers import TrainerCallback

from ...core.jsonio import append_jsonl, read_jsonl, write_jsonl

_KEEP = ("loss", "learning_rate", "grad_norm", "entropy", "mean_token_accuracy")


def trim_sft_log(path: str | Path, keep_upto_step: int) -> int:
    """Keep only the records with step <= keep_upto_step (0 empties the log); returns how many remain."""
    return write_jsonl(path, [r for r in read_jsonl(path) if r.get("step", 0) <= keep_upto_step])


def last_session(path: str | Path) -> int:
    return max((r.get("session", 0) for r in read_jsonl(path)), default=0)


PROGRESS_EVERY_S = 10.0  # a progress line at most this often
PROGRESS_QUIET_S = 20.0  # a step running longer than this gets a "still running" line, and again after as long


def _echo(line: str) -> None:
    # tqdm.write: a line that does not break a progress bar drawn on the same terminal
    tqdm.write(line, file=sys.stdout)
    sys.stdout.flush()


def duration(seconds: float) -> str:
    """`42 s`, `5m 44s`, `1h 05m`: a duration as the progress lines say it."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def progress_line(step: int, max_steps: int, epoch: float, epochs: float, loss: float | None,
                  s_per_step: float | None, tokens_per_s: float | None, left_s: float | None) -> str:
    """One line of SFT progress: which step of how many, in which epoch, the loss, the speed, the time left."""
    of_epochs = f"{epochs:g}" if epochs else "?"
    head = f"SFT step {step}/{max_steps} (epoch {max(1, math.ceil(epoch - 1e-9))} of {of_epochs})"
    parts = []
    if loss is not None:
        parts.append(f"loss {loss:.4g}")
    if s_per_step:
        parts.append(f"{s_per_step:.1f} s/step" if s_per_step >= 1 else f"{1 / s_per_step:.1f} steps/s")
    if tokens_per_s:
        parts.append(f"{tokens_per_s:,.0f} tokens/s")
    if left_s is not None:
        parts.append(f"about {duration(left_s)} left")
    return f"{head}: {', '.join(parts)}" if parts else head


class JsonlLogCallback(TrainerCallback):
    """Appends one record per Trainer log event to the run's SFT log (main process only), and prints
    the training's progress (see the module docstring; `echo` receives the lines)."""

    def __init__(self, path: str | Path, session: int, echo: Callable[[str], None] | None = None,
                 every_s: float = PROGRESS_EVERY_S, quiet_s: float = PROGRESS_QUIET_S):
        self.path = Path(path)
        self.session = session
        self.t_begin: float | None = None
        self._last_time: float | None = None
        self._last_tokens = 0.0
        self.records: list[dict[str, Any]] = []
        # progress lines
        self.echo = echo or _echo
        self.every_s, self.quiet_s = every_s, quiet_s
        self._first_step = self._last_step = 0  # global_step when this session's training began; the latest
        self._max_steps = 0
        self._epochs = 0.0
        self._step_done_at: float | None = None  # when the latest step ended
        self._said_at = self._step_said_at = 0.0  # when the latest line was printed; the latest step's line
        self._pending: tuple[int, float] | None = None  # a step whose line waits for its loss (on_log)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.t_begin = self._last_time = self._step_done_at = time.perf_counter()
        self._said_at = self._step_said_at = self.t_begin
        self._first_step = self._last_step = state.global_step
        self._max_steps = state.max_steps
        self._epochs = float(getattr(args, "num_train_epochs", 0) or 0)
        anchor = _training_frame()
        if anchor is not None and self.quiet_s > 0:
            self._stop.clear()
            self._beat = threading.Thread(target=self._heartbeat, args=(threading.get_ident(), anchor),
                                          name="sft-progress", daemon=True)
            self._beat.start()

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        now = time.perf_counter()
        with self._lock:
            self._step_done_at, self._last_step = now, state.global_step
            if self._pending is not None:  # its log never came
                self._say(*self._pending, None, now)
            if control.should_log:
                self._pending = (state.global_step, float(state.epoch or 0.0))  # on_log prints it, with its loss
            else:
                self._maybe_say(state.global_step, float(state.epoch or 0.0), None, now)

    def on_train_end(self, args, state, control, **kwargs):
        self._stop.set()
        with self._lock:
            if self._pending is not None:
                self._say(*self._pending, None, time.perf_counter())

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "eval_loss" in logs and state.is_world_process_zero:
            append_jsonl(self.path, {"step": state.global_step, "epoch": round(float(state.epoch or 0.0), 4),
                                     "eval_loss": float(logs["eval_loss"]), "kind": "eval",
                                     "elapsed_s": round(time.perf_counter() - (self.t_begin or time.perf_counter()), 3),
                                     "session": self.session})
            return
        if "loss" not in logs or not state.is_world_process_zero:
            return  # the end-of-training summary is not a step record
        now = time.perf_counter()
        tokens = float(logs.get("num_tokens", 0.0))
        dt = now - (self._last_time or now)
        rec: dict[str, Any] = {"step": state.global_step, "epoch": round(float(state.epoch or 0.0), 4)}
        for key in _KEEP:
            if key in logs and logs[key] is not None:
                v = float(logs[key])
                rec[key] = v if math.isfinite(v) else None
        rec["tokens_per_s"] = round((tokens - self._last_tokens) / dt, 1) if dt > 0 else None
        rec["num_tokens"] = int(tokens)
        rec["elapsed_s"] = round(now - (self.t_begin or now), 3)
        rec["session"] = self.session
        self._last_time, self._last_tokens = now, tokens
        self.records.append(rec)
        append_jsonl(self.path, rec)
        with self._lock:
            if self._pending is not None and self._pending[0] == state.global_step:
                step, epoch = self._pending
                self._pending = None
                self._maybe_say(step, epoch, rec.get("loss"), now)

    # -- progress lines ----------------------------------------------------------------

    def _per_step(self, step: int, now: float) -> float | None:
        done = step - self._first_step
        return (now - self.t_begin) / done if done > 0 and self.t_begin is not None else None

    def _maybe_say(self, step: int, epoch: float, loss: float | None, now: float) -> None:
        first, last = step == self._first_step + 1, step >= self._max_steps
        if first or last or now - self._step_said_at >= self.every_s:  # "still running" lines do not count
            self._say(step, epoch, loss, now)

    def _say(self, step: int, epoch: float, loss: float | None, now: float) -> None:
        self._pending = None
        per_step = self._per_step(step, now)
        left = per_step * max(self._max_steps - step, 0) if per_step else None
        tokens_per_s = None
        if self.records and self.t_begin is not None and self.records[-1]["elapsed_s"] > 0:
            tokens_per_s = self.records[-1]["num_tokens"] / self.records[-1]["elapsed_s"]
        self.echo(progress_line(step, self._max_steps, epoch, self._epochs, loss, per_step, tokens_per_s, left))
        self._said_at = self._step_said_at = now

    def _heartbeat(self, thread_id: int, anchor: FrameType) -> None:
        """While the training loop runs (its frame is on the training thread's stack, so a training that
        raised stops this too), a line whenever nothing was said for `quiet_s`."""
        while not self._stop.wait(1.0):
            if not _on_stack(thread_id, anchor):
                return
            now = time.perf_counter()
            with self._lock:
                if now - self._said_at >= self.quiet_s:
                    if self._pending is not None:  # a step ended and its log is slow to come: say the step
                        self._say(*self._pending, None, now)
                    else:
                        self.echo(self._still_running_line(now))
                        self._said_at = now

    def _still_running_line(self, now: float) -> str:
        done = self._last_step
        into = now - (self._step_done_at or now)
        head = f"SFT step {min(done + 1, self._max_steps)}/{self._max_steps} still running ({duration(into)} so far"
        if done == self._first_step:
            return head + "; the first step includes the start-up)"
        per_step = self._per_step(done, self._step_done_at or now)
        left = max((per_step or 0.0) * max(self._max_steps - done, 0) - into, 0.0)
        return head + f"; {per_step:.1f} s/step until now, about {duration(left)} left)"


def _training_frame() -> FrameType | None:
    """The Trainer's training-loop frame (or its `train`) on the current stack: alive while it trains."""
    frame = sys._getframe(1)
    found = None
    while frame is not None:
        if frame.f_code.co_name == "_inner_training_loop":
            return frame
        if frame.f_code.co_name == "train" and found is None:
            found = frame
        frame = frame.f_back
    return found


def _on_stack(thread_id: int, anchor: FrameType) -> bool:
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame is anchor:
            return True
        frame = frame.f_back
    return False


def spent_before(path: str | Path, session: int) -> float:
    """Training seconds the sessions before `session` spent (the last `elapsed_s` each logged)."""
    spent: dict[int, float] = {}
    for r in read_jsonl(path):
        s = r.get("session", 1)
        if s < session:
            spent[s] = max(spent.get(s, 0.0), float(r.get("elapsed_s") or 0.0))
    return sum(spent.values())


def last_eval_loss(path: str | Path) -> float | None:
    evals = [r["eval_loss"] for r in read_jsonl(path) if r.get("eval_loss") is not None]
    return evals[-1] if evals else None


class TimeBudget(TrainerCallback):
    """Stops training (the Trainer then saves as at a normal end) once `budget_s` seconds of
    training are spent, counting what earlier sessions of the same run spent; `stopped` says it did."""

    def __init__(self, budget_s: float, spent_before: float = 0.0):
        self.budget_s, self.spent_before = float(budget_s), float(spent_before)
        self.t_begin: float | None = None
        self.stopped = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.t_begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.t_begin is not None and self.spent_before + time.perf_counter() - self.t_begin >= self.budget_s:
            self.stopped = True
            control.should_training_stop = True
            control.should_save = True
