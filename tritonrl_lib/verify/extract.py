"""Take the solution module out of a model completion, whatever shape the model wrote it in.

The source project lost its whole evaluation to a regex that broke on prose around the code, so
this reads completions the way a person would, line by line:

1. Normalise: CRLF/CR line ends, a byte-order mark, chat-template role headers.
2. Drop reasoning: `<think>...</think>` (also `<thinking>`, `<reasoning>`), a closing tag whose
   opening tag was in the prompt, and an unclosed `<think>` (everything after it is reasoning).
   Code that appears only inside reasoning is not an answer (reason `think_only`).
3. Cut at the first end-of-turn token (`<|im_end|>`, `<|endoftext|>`, `</s>`, ...), so a
   hallucinated next turn is ignored; if that leaves no code, the tokens are removed instead.
4. Find fenced blocks (``` or ~~~, any tag, indented fences, a fence opened at the end of a prose
   line, a closing fence glued to the last code line, an unclosed last fence of a truncated
   generation, and a solution written before a lone closing fence when the prompt pre-filled the
   opening one).
5. Choose: the blocks defining `class ModelNew`, preferring the last one that parses, then the
   last closed one. If that block uses names (kernels, imports) that only other blocks define,
   those blocks are merged in, in document order. With no ModelNew anywhere, the last Python
   block is returned and the static stage reports `no_modelnew`.
6. No fence at all: the longest region that starts at the first line of code and parses, with
   prose lines before and after (and, if needed, between) left out.

Repairs are applied only to code that does not parse as written, and only when they make it
parse: HTML entities (`&lt;` from a web UI), non-breaking spaces, tabs mixed with spaces.
"""

from __future__ import annotations

import ast
import builtins
import html
import re
import textwrap
import warnings
from dataclasses import dataclass

from . import reasons as R
from ..core.fences import closing_fence, opening_fence

# --------------------------------------------------------------------------- result


@dataclass
class Extraction:
    code: str | None  # the module, ending in one newline; None when there is none
    reason: str  # "ok" | "empty_completion" | "no_code" | "think_only" (verify/reasons.py)
    detail: str  # for people: which block was chosen and why, or why nothing was
    candidates: int = 0  # code blocks seen in the answer (fenced blocks, or 1 for a bare module)
    method: str = ""  # fenced | unclosed_fence | merged | prefilled_fence | bare | ""


# --------------------------------------------------------------------------- vocabulary

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "triton", "pytorch", "torch", "ipython",
                         "ipython3", "pycon", "python-triton", "py.triton", "sage"})
NON_PYTHON_TAGS = frozenset({
    "bash", "sh", "shell", "zsh", "console", "text", "txt", "plaintext", "plain", "json", "yaml",
    "yml", "toml", "ini", "cfg", "cpp", "c++", "c", "h", "hpp", "cuda", "cu", "diff", "patch",
    "output", "stdout", "log", "markdown", "md", "html", "xml", "sql", "javascript", "js",
    "typescript", "ts", "rust", "rs", "go", "java", "ptx", "llvm", "mlir", "asm", "csv",
})
# End-of-turn tokens of the common chat templates; the answer ends at the first one.
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end_of_text|>",
               "<end_of_turn>", "<|end|>", "<｜end▁of▁sentence｜>", "<|END_OF_TURN_TOKEN|>",
               "<|eom_id|>", "<|return|>", "<|end_of_turn|>", "[/ASSISTANT]")
# Role headers a completion may start with when the template leaks into it.
_ROLE_HEADER = re.compile(
    r"^\s*(?:<s>\s*)?(?:<\|im_start\|>\s*assistant\b[^\n]*\n|<\|start_header_id\|>\s*assistant\s*"
    r"<\|end_header_id\|>\s*|<start_of_turn>\s*model\b[^\n]*\n|<\|assistant\|>\s*|\[/INST\]\s*"
    r"|<｜Assistant｜>\s*|Assistant:\s*\n)",
    re.IGNORECASE)
_THINK_TAG = re.compile(r"<(/?)(think|thinking|reasoning|thought)>", re.IGNORECASE)
_REFERENCE_DEF = re.compile(r"^class[ \t]+Model\b", re.MULTILINE)
_MODELNEW_DEF = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
_CODE_START = re.compile(
    r"^(?:import[ \t]+\w|from[ \t]+[\w.]+[ \t]+import\b|@[A-Za-z_]|class[ \t]+\w|def[ \t]+\w"
    r"|async[ \t]+def\b|#!)")
_COMPOUND = re.compile(r"^(?:class|def|if|elif|else|for|while|with|try|except|finally|async|match|case|lambda)\b")
_BLOCK_OPENERS = re.compile(
    r"^(?:class|def|async|if|elif|else|for|while|with|try|except|finally|return|@|\)|\]|\}|#)")


@dataclass
class _Block:
    index: int  # 1-based, in document order
    info: str
    lang: str
    code: str
    closed: bool
    line: int  # 1-based line of the opening fence in the answer text
    parses: bool = False
    repaired: str = ""
    defines_modelnew: bool = False

    @property
    def label(self) -> str:
        tag = self.lang or "untagged"
        state = "closed" if self.closed else "unclosed"
        return f"block {self.index} ({tag}, {state}, line {self.line})"


# --------------------------------------------------------------------------- helpers


def _parse(code: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _trim(code: str) -> str:
    """Drop blank lines at both ends and trailing spaces at the very end; end in one newline."""
    lines = code.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _retab(code: str) -> str:
    """Expand tabs in leading whitespace only (string literals keep their tabs)."""
    out = []
    for line in code.split("\n"):
        stripped = line.lstrip(" \t")
        lead = line[: len(line) - len(stripped)]
        out.append(lead.expandtabs(4) + stripped)
    return "\n".join(out)


_REPAIRS = (
    ("html entities", lambda c: html.unescape(c) if re.search(r"&(?:lt|gt|amp|quot|#39|#x27);", c) else c),
    ("non-breaking spaces", lambda c: c.replace("\u00a0", " ").replace("\u200b", "")),
    ("tabs", _retab),
)


def _finish(code: str) -> tuple[str, bool, str]:
    """-> (code, parses, repair applied). Dedent, trim, and repair only what does not parse."""
    code = _trim(textwrap.dedent(code))
    if _parse(code) is not None:
        return code, True, ""
    for name, fix in _REPAIRS:
        fixed = _trim(textwrap.dedent(fix(code)))
        if fixed != code and _parse(fixed) is not None:
            return fixed, True, name
    return code, False, ""


def _looks_like_python(code: str) -> bool:
    return any(_CODE_START.match(line) for line in code.split("\n")) or "triton" in code


def _split_think(text: str) -> tuple[str, str, bool]:
    """-> (answer, reasoning, unclosed). Handles <think>..</think>, a closing tag whose opening
    tag was in the prompt, and an opening tag never closed (the rest is reasoning)."""
    answer, reasoning = [], []
    pos, inside, unclosed = 0, False, False
    for m in _THINK_TAG.finditer(text):
        closing = m.group(1) == "/"
        if not inside and not closing:
            answer.append(text[pos:m.start()])
            inside, pos = True, m.end()
        elif inside and closing:
            reasoning.append(text[pos:m.start()])
            inside, pos = False, m.end()
        elif not inside and closing:
            # The opening tag was in the prompt: everything so far was reasoning.
            reasoning.extend(answer)
            reasoning.append(text[pos:m.start()])
            answer, pos = [], m.end()
    if inside:
        reasoning.append(text[pos:])
        unclosed = True
    else:
        answer.append(text[pos:])
    return "".join(answer), "\n".join(reasoning), unclosed


_HARMONY_ANALYSIS = re.compile(r"(?:<\|start\|>\s*assistant\s*)?<\|channel\|>\s*analysis\s*<\|message\|>(.*?)(?:<\|end\|>|$)",
                               re.DOTALL)
_HARMONY_HEADER = re.compile(r"(?:<\|start\|>\s*assistant\s*)?<\|channel\|>\s*\w+\s*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>")


def _harmony_to_think(text: str) -> str:
    """gpt-oss "harmony" output: the analysis channel is reasoning, the final channel the answer."""
    if "<|channel|>" not in text:
        return text
    text = _HARMONY_ANALYSIS.sub(lambda m: "<think>" + m.group(1) + "</think>", text)
    return _HARMONY_HEADER.sub("", text)


def _cut_at_end_marker(text: str) -> str:
    cut = len(text)
    for marker in END_MARKERS:
        i = text.find(marker)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]


def _strip_markers(text: str) -> str:
    for marker in END_MARKERS:
        text = text.replace(marker, "\n")
    return re.sub(r"<\|im_start\|>\s*\w*", "\n", text)


def _lang_of(info: str) -> str:
    word = info.strip().split()[0] if info.strip() else ""
    return re.sub(r"[^a-z0-9+#._-]", "", word.lower().strip("{}."))


# --------------------------------------------------------------------------- fences


def _scan_fences(text: str) -> tuple[list[_Block], list[str]]:
    """-> (fenced blocks, lines outside any fence). Content keeps its indentation; `_finish`
    dedents it, so a fence indented inside a list item works whether or not the code under it
    was indented too (CommonMark's strip-the-fence-indent rule would break 4-space code)."""
    lines = text.split("\n")
    blocks: list[_Block] = []
    outside: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        opening = opening_fence(line)
        if opening is None:
            outside.append(line)
            i += 1
            continue
        fence, info = opening.fence, opening.info
        if opening.start:  # a fence at the end of a prose line: the prose stays outside
            outside.append(line[:opening.start])
        content: list[str] = []
        closed = False
        j = i + 1
        while j < n:
            before = closing_fence(lines[j], fence)
            if before is not None:
                if before:  # the last code line, with the closing fence glued to its end
                    content.append(before)
                closed = True
                break
            content.append(lines[j])
            j += 1
        blocks.append(_Block(index=len(blocks) + 1, info=info, lang=_lang_of(info),
                             code="\n".join(content), closed=closed, line=i + 1))
        i = j + 1
    return blocks, outside


# --------------------------------------------------------------------------- bare modules


def _is_prose(line: str) -> bool:
    """A column-0 line that is not Python: 'This kernel fuses the add and the ReLU.',
    'Explanation:', 'Done'."""
    if not line.strip() or line[:1] in " \t":
        return False
    s = line.strip()
    if _BLOCK_OPENERS.match(s) or s.endswith(("(", "[", "{", ",", "\\")):
        return False
    if s.endswith(":"):
        return not _COMPOUND.match(s)
    tree = _parse(s)
    if tree is None:
        return True
    # a lone word or string on its own line ("Done", "Output") does nothing in a module
    return len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) \
        and isinstance(tree.body[0].value, ast.Name)


def _find_bare(text: str) -> tuple[str, bool, str] | None:
    """The module in a completion with no fences: -> (code, parses, repair) or None."""
    lines = text.split("\n")
    start = next((k for k, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        return None
    while start > 0 and re.match(r"#(?!#)", lines[start - 1]):
        start -= 1  # keep a comment header that sits right above the first import
    end = len(lines)
    # Trailing prose, blank lines and markdown headings (`### Notes`, a comment to Python) go.
    while end > start and (not lines[end - 1].strip() or _is_prose(lines[end - 1])
                           or lines[end - 1].startswith("#")):
        end -= 1
    code, ok, repair = _finish("\n".join(lines[start:end]))
    if ok:
        return code, True, repair
    # prose between code lines ("Now the model class:")
    region = [ln for ln in lines[start:end] if not _is_prose(ln)]
    code, ok, repair = _finish("\n".join(region))
    if ok:
        return code, True, repair
    # a truncated module: keep it whole, the static stage will name the syntax error
    return _finish("\n".join(lines[start:end]))


# --------------------------------------------------------------------------- choosing


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _free_names(tree: ast.Module) -> set[str]:
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - _defined_names(tree) - set(dir(builtins))


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _merge(chosen: _Block, blocks: list[_Block]) -> list[_Block]:
    """The blocks whose definitions `chosen` needs (transitively), in document order."""
    tree = _parse(chosen.code)
    if tree is None:
        return [chosen]
    # Never merge another ModelNew (an alternative version) or an echo of the reference `Model`.
    others = [(b, _parse(b.code)) for b in blocks if b is not chosen and b.parses
              and not b.defines_modelnew and b.lang not in NON_PYTHON_TAGS
              and not _REFERENCE_DEF.search(b.code)]
    others = [(b, t) for b, t in others if t is not None]
    picked = [chosen]
    need = _free_names(tree)
    changed = True
    while need and changed:
        changed = False
        for b, t in others:
            if b in picked:
                continue
            provides = _top_level_names(t)
            if provides & need:
                picked.append(b)
                need = (need - provides) | (_free_names(t) - _provided(picked))
                changed = True
    return sorted(picked, key=lambda b: b.index)


def _provided(blocks: list[_Block]) -> set[str]:
    out: set[str] = set()
    for b in blocks:
        t = _parse(b.code)
        if t is not None:
            out |= _top_level_names(t)
    return out


def _choose(blocks: list[_Block]) -> tuple[str, str, str] | None:
    """-> (code, method, detail) from fenced blocks, or None when none holds Python."""
    with_model = [b for b in blocks if b.defines_modelnew]
    if with_model:
        chosen = (next((b for b in reversed(with_model) if b.parses and b.closed), None)
                  or next((b for b in reversed(with_model) if b.parses), None)
                  or next((b for b in reversed(with_model) if b.closed), None)
                  or with_model[-1])
        why = f"{chosen.label} defines ModelNew"
        if len(with_model) > 1:
            why += f" (last complete of {len(with_model)} blocks defining it)"
        method = "fenced" if chosen.closed else "unclosed_fence"
        parts = _merge(chosen, blocks) if chosen.parses else [chosen]
        if len(parts) > 1:
            code, parses, repair = _finish("\n\n".join(b.code for b in parts))
            if parses:
                merged = ", ".join(str(b.index) for b in parts)
                return code, "merged", f"{why}; merged blocks {merged} it needs"
        note = f"; repaired {chosen.repaired}" if chosen.repaired else ""
        return chosen.code, method, why + note
    python = [b for b in blocks if b.lang in PYTHON_TAGS
              or (b.lang not in NON_PYTHON_TAGS and b.parses and _looks_like_python(b.code))]
    python = [b for b in python if b.code.strip()]
    if not python:
        return None
    chosen = (next((b for b in reversed(python) if b.parses and _looks_like_python(b.code)), None)
              or python[-1])
    method = "fenced" if chosen.closed else "unclosed_fence"
    return chosen.code, method, f"{chosen.label}: no block defines ModelNew, returning the last Python block"


# --------------------------------------------------------------------------- entry point


def _extract_from_answer(answer: str) -> tuple[str | None, str, str, int]:
    """-> (code, method, detail, candidates) from reasoning-free answer text."""
    blocks, outside = _scan_fences(answer)
    # A lone closing fence after code: the prompt pre-filled the opening ```python.
    if blocks and not blocks[0].info:
        before = answer.split("\n")[: blocks[0].line - 1]
        pre = _find_bare("\n".join(before))
        if pre and pre[1] and (_MODELNEW_DEF.search(pre[0]) or not blocks[0].closed):
            rest_blocks, _ = _scan_fences("\n".join(answer.split("\n")[blocks[0].line:]))
            head = _Block(index=1, info="", lang="", code=pre[0], closed=True, line=1)
            blocks = [head] + [_renumber(b, k + 2) for k, b in enumerate(rest_blocks)]
            _annotate(blocks)
            got = _choose(blocks)
            if got is not None:
                code, method, detail = got
                if method == "fenced" and got[0] == head.code:
                    method, detail = "prefilled_fence", "code before a lone closing fence (opening fence was in the prompt)"
                return code, method, detail, len(blocks)
    _annotate(blocks)
    if blocks:
        got = _choose(blocks)
        if got is not None:
            return got[0], got[1], got[2], len(blocks)
    bare = _find_bare("\n".join(outside) if blocks else answer)
    if bare is not None and (bare[1] or _MODELNEW_DEF.search(bare[0])):
        note = f"; repaired {bare[2]}" if bare[2] else ""
        detail = "no fenced code block; took the module written without fences" + note
        if not bare[1]:
            detail += " (it does not parse as written)"
        return bare[0], "bare", detail, len(blocks) + 1
    if blocks:
        tags = ", ".join(sorted({b.lang or "untagged" for b in blocks}))
        return None, "", f"{len(blocks)} code block(s) ({tags}) but none holds Python code", len(blocks)
    return None, "", "no code block and no Python module in the completion", 0


def _renumber(b: _Block, index: int) -> _Block:
    b.index = index
    return b


def _annotate(blocks: list[_Block]) -> None:
    for b in blocks:
        b.code, b.parses, b.repaired = _finish(b.code)
        b.defines_modelnew = bool(_MODELNEW_DEF.search(b.code))


def extract_code(completion: str | None) -> Extraction:
    """The solution module in `completion`, or a reason there is none (see the module doc)."""
    if completion is None:
        return Extraction(None, R.EMPTY_COMPLETION, "the completion is None", 0)
    if not isinstance(completion, str):
        raise TypeError(f"extract_code expects the completion text (str), got {type(completion).__name__}")
    text = completion.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    if not text.strip() or not _strip_markers(text).strip():
        return Extraction(None, R.EMPTY_COMPLETION, "the completion is empty or only whitespace "
                          "and template tokens", 0)
    text = _ROLE_HEADER.sub("", text, count=1)
    text = _harmony_to_think(text)
    answer, reasoning, unclosed = _split_think(text)
    code, method, detail, n = _extract_from_answer(_cut_at_end_marker(answer))
    if code is None:
        stripped = _strip_markers(answer)
        if stripped != answer:
            code2, method2, detail2, n2 = _extract_from_answer(stripped)
            if code2 is not None:
                code, method, detail, n = code2, method2, detail2 + " (after an end-of-turn token)", n2
    if code is not None and code.strip():
        return Extraction(code, R.OK, detail, n, method)
    if reasoning.strip():
        in_think = _extract_from_answer(reasoning)[0] is not None
        if in_think:
            why = ("the reasoning section was never closed (truncated before the answer)" if unclosed
                   else "the answer after the reasoning section has no code")
            return Extraction(None, R.THINK_ONLY, f"code appears only inside <think>: {why}", n)
        if unclosed:
            return Extraction(None, R.NO_CODE, "the completion ends inside an unclosed <think> "
                              "section: the answer never started", n)
    return Extraction(None, R.NO_CODE, detail, n)
