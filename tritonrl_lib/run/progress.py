"""What a running notebook is doing, shown in the terminal of `tritonrl run`.

papermill hands the runner every piece of text the notebook's kernel writes, as it is written. A
`StepMonitor` turns it into terminal output:

- each line the notebook prints (its status messages: what it found on disk, that it resumed from a
  checkpoint, per-round results) appears indented under the step's own line;
- the latest state of its progress bars (tqdm's `rollout: 25%|..| 1/4 [...]`, written to stderr) is
  one live line on a terminal, rewritten in place; in a log file a bar appears when it finishes, and
  the latest state at most every `every_s` seconds while one runs;
- a printed line that counts steps (SFT's `SFT step 3/12 (epoch 1 of 1): loss 1.623, ...`) is shown
  as a line and also becomes the latest progress;
- the step's live logs (RunPaths names in `run_state.STEPS[...].watch`, for a step whose loop prints
  nothing: none does at present) add a status such as `sft_log: step 12, loss 1.234` as records arrive;
- nothing is silent for long: on a terminal the live line's clock ticks every second; in a log file a
  step that printed nothing for `quiet_s` (25 s) gets a "still running" line with its latest progress.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Sequence, TextIO

from ..core.jsonio import DamagedFile, read_jsonl

# tqdm's text: "desc:  25%|██▌       | 1/4 [00:01<00:04,  1.37s/seq]" (desc and rate optional)
_BAR = re.compile(r"(?P<pct>\d{1,3})%\|.*?\|\s*(?P<n>[\d.]+[kMG]?)/(?P<total>[\d.]+[kMG]?)")
_LIVE_KEYS = ("step", "round", "epoch", "loss", "correct_rate", "mean_reward")
# a printed line that says how far a step got: "SFT step 3/12 (epoch 1 of 1): loss 1.623, ..."
_COUNTING_LINE = re.compile(r"\bstep \d+/\d+\b")


def describe_bar(text: str) -> tuple[str, bool, str] | None:
    """(a compact form of a tqdm bar's text, whether it is finished, what it counted: `desc: n/total`),
    or None for text that is not a bar."""
    m = _BAR.search(text)
    if m is None:
        return None
    desc = text[:m.start()].strip().rstrip(":").strip()
    count = f"{desc + ': ' if desc else ''}{m['n']}/{m['total']}"
    return f"{count} ({m['pct']}%) {text[m.end():].strip()}".strip(), m["n"] == m["total"], count


def describe_record(name: str, record: dict) -> str:
    """One line of a live log record: the keys that say how far the step got."""
    parts = []
    for key in _LIVE_KEYS:
        v = record.get(key)
        if v is None:
            continue
        parts.append(f"{key} {v:.3f}" if isinstance(v, float) and key != "epoch" else
                     f"{key} {v:.2f}" if isinstance(v, float) else f"{key} {v}")
    return f"{name}: {', '.join(parts)}" if parts else ""


class _Stream:
    """The file-like object papermill writes one stream of the kernel's output to."""

    def __init__(self, on_text: Callable[[str], None]):
        self.on_text = on_text

    def write(self, text: str) -> int:
        self.on_text(text)
        return len(text)

    def flush(self) -> None:
        pass


class StepMonitor:
    """Forwards one running notebook's output to `log` (lines) and a live status line (bars, logs).

    `live`: rewrite one status line in place on `terminal` (a TTY), with the step's elapsed time,
    ticking even while the notebook is silent; otherwise statuses become log lines, throttled, and a
    notebook silent for `quiet_s` gets a "still running" line. `watch`: (label, path) of JSONL logs
    whose new records are statuses."""

    def __init__(self, log: Callable[[str], None], *, live: bool, indent: str = "      ",
                 watch: Sequence[tuple[str, Path]] = (), every_s: float = 30.0, quiet_s: float = 25.0,
                 terminal: TextIO | None = None):
        self.log, self.live, self.indent = log, live, indent
        self.every_s, self.quiet_s = every_s, quiet_s
        self.terminal = terminal or sys.stderr
        self.watch = [(label, Path(path)) for label, path in watch]
        self._partial = {"stdout": "", "stderr": ""}
        self._started = self._said_at = time.monotonic()  # when the step began; when a log line last appeared
        self._status = ""  # the latest progress
        self._drawn = False  # a live line is on the terminal
        self._status_key = ""  # what the last status logged (not live) counted
        self._status_at = self._started  # a log gets finished bars, and a heartbeat every `every_s`
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sizes = {p: (p.stat().st_size if p.is_file() else 0) for _, p in self.watch}
        self.stdout = _Stream(lambda t: self._text("stdout", t))
        self.stderr = _Stream(lambda t: self._text("stderr", t))

    # -- lines and statuses -----------------------------------------------------------

    def _say(self, text: str) -> None:
        self.log(f"{self.indent}{text}")
        self._said_at = time.monotonic()

    def line(self, text: str) -> None:
        with self._lock:
            self._clear_live()
            self._say(text)
            if _COUNTING_LINE.search(text):
                self._status = text.strip()  # the live line and the "still running" lines name it
            self._draw()

    def status(self, text: str, final: bool = False, key: str | None = None) -> None:
        """The step's latest progress. `key` names what it counts (a redraw of the same count with a
        new rate is no news for a log)."""
        if not text:
            return
        with self._lock:
            self._status = text
            if self.live:
                self._draw()
                return
            key = key or text
            now = time.monotonic()
            if key != self._status_key and (final or now - self._status_at >= self.every_s):
                self._status_key, self._status_at = key, now
                self._say(text)

    def _elapsed(self) -> str:
        m, s = divmod(int(time.monotonic() - self._started), 60)
        return f"{m}m {s:02d}s"

    def _draw(self) -> None:
        if not self.live:
            return
        text = f"[{self._elapsed()}] {self._status or 'running'}"
        self.terminal.write("\r\x1b[K" + self.indent + text[:110])
        self.terminal.flush()
        self._drawn = True

    def _clear_live(self) -> None:
        if self._drawn:
            self.terminal.write("\r\x1b[K")
            self.terminal.flush()
            self._drawn = False

    def _text(self, stream: str, text: str) -> None:
        """A chunk of the kernel's stdout or stderr: complete lines are lines, bar updates statuses."""
        buf = self._partial[stream] + text
        *done, rest = re.split(r"\r\n|\n", buf)
        self._partial[stream] = rest
        for piece in done:
            self._piece(piece)
        # a bar redraws its line with "\r" and no newline: show its latest state right away
        if "\r" in rest:
            *_, latest = rest.split("\r")
            self._partial[stream] = latest
            bar = describe_bar(latest)
            if bar:
                self.status(*bar)

    def _piece(self, piece: str) -> None:
        last = piece.split("\r")[-1] if "\r" in piece else piece
        if not last.strip():
            return
        bar = describe_bar(last)
        if bar:
            self.status(*bar)
        else:
            self.line(last.rstrip())

    # -- live logs and the clock -------------------------------------------------------

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            for label, path in self.watch:
                size = path.stat().st_size if path.is_file() else 0
                if size == self._sizes[path]:
                    continue
                self._sizes[path] = size
                try:
                    rows = read_jsonl(path)
                except DamagedFile:
                    continue
                if rows:
                    self.status(describe_record(label, rows[-1]))
            with self._lock:
                if self.live:
                    self._draw()  # the clock ticks while the notebook is silent
                elif time.monotonic() - self._said_at >= self.quiet_s:
                    self._say(f"(still running, {self._elapsed()}; last progress: {self._status or 'none yet'})")

    def __enter__(self) -> "StepMonitor":
        self._thread = threading.Thread(target=self._poll, name="step-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for stream in ("stdout", "stderr"):
            rest, self._partial[stream] = self._partial[stream], ""
            if rest.strip():
                self._piece(rest)
        with self._lock:
            self._clear_live()
