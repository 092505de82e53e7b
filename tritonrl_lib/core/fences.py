"""The Markdown code-fence grammar, as this project reads a model's answer: one definition for
`extract.py` (which finds the code blocks of a whole completion) and the rollout's stop rule
(`rollout/stopping.py`, which ends a completion at the line closing its first block).

A block opens with a fence line (three or more backticks or tildes, then an optional info string:
```` ```python ````, `~~~`, an indented fence) or with a backtick fence at the end of a prose line
("Here is the code:```python"). It closes at a line that is only a fence of the same character,
at least as long, or at a backtick fence glued to the end of its last code line ("    return y```").
A line with a fence and backticks in its info string (```` ```inline``` ````) is not a fence.
"""

from __future__ import annotations

import re
from typing import NamedTuple

FENCE_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")
# "Here is the code:```python" - a fence opened at the end of a prose line.
MIDLINE_OPEN = re.compile(r"\S.*?(?P<fence>`{3,})[ \t]*(?P<info>[A-Za-z][\w+.#-]*)?[ \t]*$")
# "    return out```" - a closing fence glued to the last code line.
GLUED_CLOSE = re.compile(r"^(?P<code>.*?\S)[ \t]*(?P<fence>`{3,})[ \t]*$")


class Opening(NamedTuple):
    fence: str  # the fence itself: ``` , ```` , ~~~ ...
    info: str  # the info string after it ("python", "py title=x"), stripped
    start: int  # where the fence begins in the line: text before it is prose (0 for a fence line)


def opening_fence(line: str, tildes: bool = True) -> Opening | None:
    """The fence `line` opens a code block with, or None when it opens none (`tildes=False`: backtick
    fences only, the rollout's stop rule)."""
    m = FENCE_LINE.match(line)
    if m is not None:
        fence = m.group("fence")
        if not (fence[0] == "`" and "`" in m.group("info") or fence[0] == "~" and not tildes):
            return Opening(fence, m.group("info").strip(), 0)
    mid = MIDLINE_OPEN.match(line)
    if mid is not None and line.count("`") == len(mid.group("fence")):
        return Opening(mid.group("fence"), (mid.group("info") or "").strip(), mid.start("fence"))
    return None


def closing_fence(line: str, fence: str) -> str | None:
    """Whether `line` closes a block opened with `fence`: None when it does not; otherwise the code
    written on the line before the fence ("" for a line that is only a fence)."""
    m = FENCE_LINE.match(line)
    if m is not None and m.group("fence")[0] == fence[0] and len(m.group("fence")) >= len(fence) \
            and not m.group("info"):
        return ""
    if fence[0] == "`":
        g = GLUED_CLOSE.match(line)
        if g is not None and len(g.group("fence")) >= len(fence) and "`" not in g.group("code"):
            return line[:g.start("fence")].rstrip()
    return None
