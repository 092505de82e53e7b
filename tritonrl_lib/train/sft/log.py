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
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ...core.jsonio import append_jsonl, read_jsonl, write_jsonl

_KEEP = ("loss", "learning_rate", "grad_norm", "entropy", "mean_token_accuracy")


def trim_sft_log(path: str | Path, keep_upto_step: int) -> int:
    """Keep only the records with step <= keep_upto_step (0 empties the log); returns how many remain."""
    return write_jsonl(path, [r for r in read_jsonl(path) if r.get("step", 0) <= keep_upto_step])


def last_session(path: str | Path) -> int:
    return max((r.get("session", 0) for r in read_jsonl(path)), default=0)


class JsonlLogCallback(TrainerCallback):
    """Appends one record per Trainer log event to the run's SFT log (main process only)."""

    def __init__(self, path: str | Path, session: int):
        self.path = Path(path)
        self.session = session
        self.t_begin: float | None = None
        self._last_time: float | None = None
        self._last_tokens = 0.0
        self.records: list[dict[str, Any]] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.t_begin = self._last_time = time.perf_counter()

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
