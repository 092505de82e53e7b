"""When a sequence stops: at an end-of-turn token, at `max_new_tokens`, at the line that closes
its first code block (the fence grammar of `fences.py`, which `extract.py` reads completions with),
or once it has fallen into a loop.

The opening fence itself never stops a completion. Detection reads the decoded text of each token
(a table built once per tokenizer), so a fence split over several tokens (`` + `) is found too.
Only backtick fences stop a completion; extraction also reads `~~~` blocks.

A loop (`LoopStop`) is text repeating itself until the length runs out: a small model that has lost
its way writes `import triton.language as tl`, or a block of lines, again and again. The rule, on
lines with their trailing whitespace removed, blank lines skipped:

- the last `k * r` non-blank lines are one block of k lines (k = 1 ... 8) repeated r times in a row,
  with r >= 4 and k * r >= `min_lines` (16 by default): one line 16 times, a 2-line block 8 times,
  a 3-line block 6 times, a 4- to 8-line block 4 times (16 to 32 lines);
- or `min_lines` blank lines in a row;
- or a line that never ends: 256 characters and more, its last 192 one unit of at most 64
  characters repeated (`))))...`, `tl.tl.tl...`).

Honest code repeats far less. No reference solution of the built-in suite and no SFT target repeats
even one line twice in a row; KernelBench's references at most one line 5 times (MobileNetV1) and a
2-line block 4 times (VGG19); across 6,376 files of honest Python (PyTorch, Transformers, Triton,
KernelBench, this project) the most is one line 12 times (an argument list of `None,`), a 3-line
block 4 times, an 8-line block 3 times, 4 blank lines: none trips the rule (tests/test_loop_stop.py
holds the suite, the SFT targets and KernelBench's fixtures to it). A loop still stops within a few
hundred tokens at most: the repeated import within ~16 lines, about 110 tokens.
"""

from __future__ import annotations

from collections import deque

from ..core.fences import closing_fence, opening_fence

LOOP_LINES = 16  # SamplingConfig.loop_lines' default: lines a repeat must cover to be a loop
LOOP_MAX_BLOCK = 8  # the longest block of lines a loop may repeat
LOOP_MIN_REPEATS = 4  # copies of a block, at least, whatever its length
LONG_LINE = 256  # characters: a line this long is checked for a repeating unit
LONG_TAIL = 192  # of them at its end, which must be one unit repeated
LONG_UNIT = 64  # characters, at most, of the unit
LONG_STEP = 16  # characters of growth between two checks of a long line


class FenceStop:
    """Watches one completion's text, a token at a time, for the line closing its first code block."""

    __slots__ = ("fence", "line", "done")

    def __init__(self) -> None:
        self.fence = ""  # the opening fence, once the first code block has opened
        self.line = ""
        self.done = False

    def feed(self, piece: str) -> bool:
        """Add a token's text; True once the closing fence line is complete."""
        if self.done:
            return True
        if "\n" not in piece:
            self.line += piece
            return False
        parts = piece.split("\n")
        for part in parts[:-1]:
            self.line += part
            if self._end_line(self.line):
                self.done = True
                return True
            self.line = ""
        self.line = parts[-1]
        return False

    def _end_line(self, line: str) -> bool:
        if not self.fence:
            opening = opening_fence(line, tildes=False)
            if opening is not None:
                self.fence = opening.fence
            return False
        return closing_fence(line, self.fence) is not None


def closes_code_block(text: str) -> bool:
    """Does `text` contain a complete first code block (the stop rule, on a whole string)?"""
    det = FenceStop()
    det.feed(text + ("\n" if not text.endswith("\n") else ""))
    return det.done


class LoopStop:
    """Watches one completion's text, a token at a time, for a loop (the rule in the module's doc):
    feed() turns True once the line completing it has ended (or a never-ending line has run long)."""

    __slots__ = ("need", "recent", "runs", "blanks", "line", "checked_at", "done", "min_lines")

    def __init__(self, min_lines: int = LOOP_LINES, max_block: int = LOOP_MAX_BLOCK,
                 min_repeats: int = LOOP_MIN_REPEATS):
        if min_lines < 2:
            raise ValueError(f"a loop covers at least 2 lines, got min_lines={min_lines}")
        self.min_lines = min_lines
        # per block length k: the lines that must equal the line k before (all but the first copy)
        self.need = [0] + [(max(min_repeats, -(-min_lines // k)) - 1) * k for k in range(1, max_block + 1)]
        self.recent: deque[str] = deque(maxlen=max_block + 1)  # the last non-blank lines
        self.runs = [0] * (max_block + 1)  # per k: trailing non-blank lines equal to the one k before
        self.blanks = 0  # blank lines in a row
        self.line = ""
        self.checked_at = LONG_LINE - LONG_STEP  # the line in progress was last checked at this length
        self.done = False

    def feed(self, piece: str) -> bool:
        """Add a token's text; True once the text has fallen into a loop."""
        if self.done:
            return True
        if "\n" not in piece:
            self.line += piece
            self.done = len(self.line) >= self.checked_at + LONG_STEP and self._long_line()
            return self.done
        parts = piece.split("\n")
        for part in parts[:-1]:
            self.line += part
            if self._long_line() or self._end_line(self.line.rstrip()):
                self.done = True
                return True
            self.line, self.checked_at = "", LONG_LINE - LONG_STEP
        self.line = parts[-1]
        self.done = self._long_line()
        return self.done

    def _long_line(self) -> bool:
        """Has the line in progress become one unit repeated? Checked at its lengths LONG_LINE,
        LONG_LINE + LONG_STEP, ..., whatever the tokens' boundaries (the same answer on a whole text)."""
        line = self.line
        while len(line) >= self.checked_at + LONG_STEP:
            self.checked_at += LONG_STEP
            if _repeating_tail(line, self.checked_at):
                return True
        return False

    def _end_line(self, line: str) -> bool:
        if not line.strip():
            self.blanks += 1
            return self.blanks >= self.min_lines
        self.blanks = 0
        recent = self.recent
        n = len(recent)
        for k in range(1, len(self.runs)):
            self.runs[k] = self.runs[k] + 1 if k <= n and recent[n - k] == line else 0
        recent.append(line)
        return any(run >= need for run, need in zip(self.runs[1:], self.need[1:]))


def _repeating_tail(line: str, end: int) -> bool:
    """Are the LONG_TAIL characters of `line` before `end` one unit of at most LONG_UNIT characters
    repeated?"""
    tail = line[end - LONG_TAIL:end]
    return any(tail[p:] == tail[:-p] for p in range(1, LONG_UNIT + 1))


def falls_into_loop(text: str, min_lines: int = LOOP_LINES) -> bool:
    """Does `text` fall into a loop anywhere (the stop rule, on a whole string)?"""
    det = LoopStop(min_lines)
    det.feed(text + ("\n" if not text.endswith("\n") else ""))
    return det.done


_PIECES: dict[tuple, list[str]] = {}


def token_pieces(tokenizer) -> list[str]:
    """Decoded text of every token id (cached per tokenizer); only ASCII matters to the stop rule,
    so a lone byte of a multi-byte character decoding to U+FFFD is harmless."""
    key = (getattr(tokenizer, "name_or_path", ""), len(tokenizer), type(tokenizer).__name__)
    table = _PIECES.get(key)
    if table is None:
        table = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
        _PIECES[key] = table
    return table


def stop_token_ids(model, tokenizer) -> list[int]:
    """End-of-turn ids: the tokenizer's eos plus the model's generation_config eos (int or list)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    return sorted(ids)


class SequenceTracker:
    """Host-side state of one sequence while it decodes: its tokens so far and why it stopped."""

    __slots__ = ("prompt_index", "sample_index", "prompt_len", "tokens", "logprobs", "fence", "loop", "reason",
                 "seconds")

    def __init__(self, prompt_index: int, sample_index: int, prompt_len: int, fence: bool, loop_lines: int = 0):
        """`fence`: stop at the closing fence; `loop_lines` > 0: stop a loop covering that many lines."""
        self.prompt_index, self.sample_index, self.prompt_len = prompt_index, sample_index, prompt_len
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.fence = FenceStop() if fence else None
        self.loop = LoopStop(loop_lines) if loop_lines > 0 else None
        self.reason = ""
        self.seconds = 0.0

    def push(self, token: int, piece: str, eos: frozenset, max_new: int, logprob: float | None = None) -> bool:
        """Add one generated token; True when the sequence has finished."""
        if self.reason:
            return True
        self.tokens.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
        if token in eos:
            self.reason = "eos"
        elif self.fence is not None and self.fence.feed(piece):
            self.reason = "fence"
        elif self.loop is not None and self.loop.feed(piece):
            self.reason = "loop"
        elif len(self.tokens) >= max_new:
            self.reason = "length"
        return bool(self.reason)
