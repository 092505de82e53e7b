"""When a sequence stops: at an end-of-turn token, at `max_new_tokens`, or at the line that closes
its first code block (the fence grammar of `fences.py`, which `extract.py` reads completions with).

The opening fence itself never stops a completion. Detection reads the decoded text of each token
(a table built once per tokenizer), so a fence split over several tokens (`` + `) is found too.
Only backtick fences stop a completion; extraction also reads `~~~` blocks.
"""

from __future__ import annotations

from ..core.fences import closing_fence, opening_fence


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

    __slots__ = ("prompt_index", "sample_index", "prompt_len", "tokens", "logprobs", "fence", "reason", "seconds")

    def __init__(self, prompt_index: int, sample_index: int, prompt_len: int, fence: bool):
        self.prompt_index, self.sample_index, self.prompt_len = prompt_index, sample_index, prompt_len
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.fence = FenceStop() if fence else None
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
        elif len(self.tokens) >= max_new:
            self.reason = "length"
        return bool(self.reason)
