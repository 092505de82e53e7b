"""How both engines walk through the sequences: (prompt, sample) pairs cut into decode batches,
a progress bar over them, and the device sync that makes a batch's timings honest.

The bar (`Progress`) counts sequences done out of the call's total; its postfix says the tokens
generated so far, tokens per second since the call began and the time left (decode steps left at
the seconds per step so far). It is redrawn at least every `PROGRESS_EVERY_S` seconds while tokens
arrive, so a slow generation is never silent for minutes before its first sequence ends. A line,
as tqdm writes it to stderr (what `tritonrl run` relays, run/progress.py):

    rollout:  12%|#2        | 96/800 [04:10, tokens=41.2k, tok/s=164.8, left=29:37]
"""

from __future__ import annotations

import time
from typing import Any, TextIO

PROGRESS_EVERY_S = 10.0  # seconds between redraws of the bar, at most, while tokens arrive
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"  # tqdm's, less its rate-of-sequences ETA


class BatchPlan:
    """Sequences (prompt, sample) ordered by prompt length, cut into batches of whole prompts
    where possible."""

    def __init__(self, lengths: list[int], n: int, batch: int):
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        seqs = [(p, s) for p in order for s in range(n)]
        self.batches = [seqs[i:i + batch] for i in range(0, len(seqs), batch)]

    @property
    def sequences(self) -> int:
        return sum(len(b) for b in self.batches)


class Progress:
    """The progress of one generate call: `total` sequences of at most `max_new` tokens each, decoded
    in `batches` batches. The engines say when a batch starts (`start_batch`), what each read of
    new tokens brought (`advance`: decode steps, tokens), when a sequence stops (`finished`), and call
    `tick` between decode steps; with `enabled` False it counts and shows nothing.

    The time left is decode steps left times the seconds per step so far (prefills included): a
    batch lasts until its longest sequence stops. The running batch is expected to last as long as
    the earlier batches that went on past its current step did (`max_new` when none did: it may run
    to the length); each batch still to come as long as the earlier ones did on average (`max_new`
    before any has ended)."""

    def __init__(self, total: int, max_new: int, enabled: bool, batches: int = 1, every_s: float | None = None,
                 file: TextIO | None = None, clock=time.monotonic):
        self.total, self.max_new, self.batches, self.clock = total, max_new, batches, clock
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.tokens = 0  # generated so far, every sequence
        self.done = 0  # sequences stopped
        self.steps = 0  # decode steps so far, every batch
        self.started = 0  # batches begun
        self.current = -1  # decode steps of the running batch; -1 while none runs
        self.batch_steps: list[int] = []  # decode steps of each batch that has ended
        self.t0 = self.drawn = clock()
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="rollout", unit="seq", bar_format=BAR_FORMAT, file=file)

    def start_batch(self) -> None:
        self._end_batch()
        self.started += 1
        self.current = 0

    def _end_batch(self) -> None:
        if self.current >= 0:
            self.batch_steps.append(self.current)
            self.current = -1

    def advance(self, steps: int, tokens: int) -> None:
        """`steps` more decode steps of the running batch brought `tokens` tokens."""
        self.steps += steps
        self.current = max(self.current, 0) + steps
        self.tokens += tokens

    def finished(self) -> None:
        """One sequence stopped."""
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix(ordered_dict=self.fields(), refresh=False)
            self.bar.update(1)  # tqdm draws it, at most every 0.1 s

    def tick(self) -> None:
        """Redraw the bar when `every_s` has passed since it was last redrawn here."""
        now = self.clock()
        if self.bar is not None and now - self.drawn >= self.every_s:
            self.drawn = now
            self.bar.set_postfix(ordered_dict=self.fields(), refresh=True)

    def rate(self) -> float:
        """Tokens per second since the call began."""
        elapsed = self.clock() - self.t0
        return self.tokens / elapsed if elapsed > 0 else 0.0

    def seconds_left(self) -> float | None:
        """The time left (see the class's doc); None before the first decode step."""
        if self.steps == 0:
            return None
        per_step = (self.clock() - self.t0) / self.steps
        ended = self.batch_steps
        later = max(self.batches - self.started, 0) * (sum(ended) / len(ended) if ended else self.max_new)
        now = 0.0
        if self.current >= 0 and self.done < self.total:
            longer = [b for b in ended if b > self.current]
            now = (sum(longer) / len(longer) if longer else self.max_new) - self.current
        return max(now + later, 0.0) * per_step

    def fields(self) -> dict[str, str]:
        """The bar's postfix: tokens so far, tokens per second, time left."""
        from tqdm import tqdm

        rate, left = self.rate(), self.seconds_left()
        tokens = str(self.tokens) if self.tokens < 10_000 else tqdm.format_sizeof(self.tokens)  # 9876, 12.3k
        return {"tokens": tokens, "tok/s": f"{rate:.1f}" if rate < 1000 else f"{rate:.0f}",
                "left": tqdm.format_interval(left) if left is not None else "?"}

    def close(self) -> None:
        self._end_batch()
        if self.bar is not None:
            self.bar.set_postfix(ordered_dict=self.fields(), refresh=False)
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sync(device) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)
