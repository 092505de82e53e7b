"""The loop stop rule (rollout/stopping.py's LoopStop): a completion repeating a line, a block of lines,
blank lines or a never-ending line stops with finish_reason "loop" after a few copies, on real
tokenizers' pieces and in both engines; no honest completion (the built-in suite's reference
solutions, the SFT generator's targets of every family, KernelBench's references) ever trips it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tritonrl_lib.core.config import load_config
from tritonrl_lib.data.generate import make_candidate
from tritonrl_lib.data.templates import TEMPLATES
from tritonrl_lib.model.load import load_base_model, load_tokenizer
from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.rollout import (FINISH_REASONS, LoopStop, Rollout, SamplingConfig, falls_into_loop, stop_token_ids,
                                  token_pieces)
from tritonrl_lib.rollout.stopping import LOOP_LINES, SequenceTracker

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((REPO / "tritonrl_lib/tasks/builtin/solutions").glob("**/*.py"))
KERNELBENCH = sorted((REPO / "tests/fixtures/kernelbench/KernelBench").glob("**/*.py"))
PREAMBLE = "Here is the Triton kernel:\n```python\nimport torch\nimport triton\n"
IMPORT = "import triton.language as tl\n"
BLOCK5 = ("    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
          "    mask = offs < n\n"
          "    x = tl.load(x_ptr + offs, mask=mask)\n"
          "    y = tl.load(y_ptr + offs, mask=mask)\n"
          "    tl.store(out_ptr + offs, x + y, mask=mask)\n")
BLOCK8 = "".join(f"    acc{i} = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n" for i in range(8))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Two cores shared by several processes: one BLAS thread each is several times faster.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def track(tok, text: str, loop_lines: int = LOOP_LINES, fence: bool = False, max_new: int = 100_000):
    """`text` tokenized and pushed token by token through a SequenceTracker, as the engines do."""
    pieces = token_pieces(tok)
    eos = frozenset(stop_token_ids(object(), tok))
    tr = SequenceTracker(0, 0, 0, fence=fence, loop_lines=loop_lines)
    for token in tok(text, add_special_tokens=False)["input_ids"]:
        if tr.push(token, pieces[token], eos, max_new):
            break
    return tr


def by_chars(text: str, min_lines: int = LOOP_LINES) -> bool:
    det = LoopStop(min_lines)
    return any(det.feed(ch) for ch in text + "\n")


# --------------------------------------------------------------------------- loops stop, early

# (name, a text that loops forever, a line of it whose copies are counted, copies when it stops)
LOOPS = [
    ("repeated import", PREAMBLE + IMPORT * 300, IMPORT, 16),
    ("x = x forever", PREAMBLE + "def f(x):\n" + "    x = x\n" * 400, "    x = x\n", 16),
    ("a 5-line block", PREAMBLE + "@triton.jit\ndef k(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
     "    pid = tl.program_id(0)\n" + BLOCK5 * 60, "    mask = offs < n\n", 4),
    ("an 8-line block", PREAMBLE + BLOCK8 * 40, "    acc3 = ", 4),
    ("a line between blank lines", PREAMBLE + (IMPORT + "\n") * 200, IMPORT, 16),
    ("a 2-line block", PREAMBLE + ("    )\n" + "    x = x + 1\n") * 200, "    x = x + 1\n", 8),
]


@pytest.mark.parametrize("spec", ["tiny", "embedded"])
@pytest.mark.parametrize("name,text,line,copies", LOOPS, ids=[c[0] for c in LOOPS])
def test_a_loop_stops_after_a_few_copies(spec, name, text, line, copies):
    tok = load_tokenizer(spec)
    tr = track(tok, text)
    assert tr.reason == "loop", name
    got = tok.decode(tr.tokens)
    assert got.count(line) == copies, (name, got[-300:])
    # the stop is the token holding the newline that ends the line completing the loop
    assert text.startswith(got) and "\n" in tok.decode(tr.tokens[-1:])
    assert got[got.rindex("\n") + 1:].strip() == ""
    assert len(tr.tokens) < len(tok(text, add_special_tokens=False)["input_ids"]) / 3
    assert by_chars(text) and falls_into_loop(text)


@pytest.mark.parametrize("spec", ["tiny", "embedded"])
def test_a_line_that_never_ends_and_blank_lines_forever_stop(spec):
    tok = load_tokenizer(spec)
    for text in (PREAMBLE + "y = x" + ".tl" * 2000, PREAMBLE + "z = f(" + "x, " * 2000,
                 PREAMBLE + "def f():\n" + "\n" * 3000, PREAMBLE + "    \n" * 3000):
        tr = track(tok, text)
        assert tr.reason == "loop", text[:80]
        assert len(tok.decode(tr.tokens)) < len(PREAMBLE) + 300


@pytest.mark.parametrize("text", [
    IMPORT * 15,  # one line 15 times: 16 would stop
    ("    )\n" + "    x = x + 1\n") * 7,  # a 2-line block 7 times: 8 would stop
    BLOCK5 * 3,  # a 5-line block 3 times: 4 would stop
    BLOCK8 * 3,
    "x = 1\n" + "\n" * 15 + "y = 2\n",  # 15 blank lines: 16 would stop
    "y = " + ")" * 250,  # a line of 254 characters: checked from 256 on
    "x = torch.cat([" + ", ".join(f"t{i}" for i in range(70)) + "])",  # 376 characters, not one unit repeated
])
def test_just_under_the_thresholds_nothing_stops_and_one_copy_more_does(text):
    tok = load_tokenizer("tiny")
    assert track(tok, text).reason == ""
    assert not falls_into_loop(text) and not by_chars(text)
    longer = {IMPORT * 15: IMPORT * 16, ("    )\n" + "    x = x + 1\n") * 7: ("    )\n" + "    x = x + 1\n") * 8,
              BLOCK5 * 3: BLOCK5 * 4, BLOCK8 * 3: BLOCK8 * 4, "y = " + ")" * 250: "y = " + ")" * 260,
              "x = 1\n" + "\n" * 15 + "y = 2\n": "x = 1\n" + "\n" * 16 + "y = 2\n"}.get(text)
    if longer is not None:
        assert falls_into_loop(longer) and by_chars(longer) and track(tok, longer).reason == "loop"


def test_the_threshold_is_a_setting_and_zero_turns_it_off():
    tok = load_tokenizer("tiny")
    text = IMPORT * 40
    assert SamplingConfig().loop_lines == LOOP_LINES == 16
    assert track(tok, text, loop_lines=0).reason == ""
    assert tok.decode(track(tok, text, loop_lines=30).tokens).count(IMPORT) == 30
    with pytest.raises(ValueError, match="loop_lines"):
        SamplingConfig(loop_lines=1)
    assert "loop" in FINISH_REASONS


def test_a_closing_fence_still_wins_over_a_loop_after_it():
    tok = load_tokenizer("tiny")
    tr = track(tok, "```python\nx = 1\n```\n" + "Done.\n" * 40, fence=True)
    assert tr.reason == "fence"


# --------------------------------------------------------------------------- honest code never trips it


def honest_texts() -> list[tuple[str, str]]:
    """Every reference solution of the suite (as a file and as the fenced answer the model is taught),
    KernelBench's fixture references, and the SFT generator's targets: 5 of every templated family."""
    out = [(p.name, p.read_text()) for p in SOLUTIONS + KERNELBENCH]
    out += [(f"{p.name} (answer)", format_completion(p.read_text())) for p in SOLUTIONS]
    for family in TEMPLATES:
        for index in range(5):
            cand = make_candidate(family, 0, index)
            out.append((f"{family}#{index}", cand.completion))
    return out


def test_no_honest_completion_trips_the_rule():
    texts = honest_texts()
    assert len(SOLUTIONS) >= 90 and len(KERNELBENCH) >= 6 and len(texts) >= len(TEMPLATES) * 5 + 180
    tok = load_tokenizer("tiny")
    tripped = [name for name, text in texts if falls_into_loop(text) or track(tok, text).reason == "loop"]
    assert tripped == []


def most_copies(text: str) -> int:
    """The most copies in a row of one line, or one block of up to 8 lines (blank lines skipped)."""
    lines = [ln.rstrip() for ln in text.split("\n") if ln.strip()]
    best = 1
    for k in range(1, 9):
        run = 0
        for i in range(k, len(lines)):
            run = run + 1 if lines[i] == lines[i - k] else 0
            best = max(best, 1 + run // k)
    return best


def test_honest_completions_repeat_far_less_than_the_rule_allows():
    """The margin, measured: no reference solution and no SFT target repeats a line (or a block) even
    twice in a row; KernelBench's fixture references a line twice (Conv2d_Mish_Mish's `x = F.mish(x)`),
    where the rule wants 16 copies of a line, 4 of a block."""
    kernelbench = {p.name for p in KERNELBENCH}
    own = [text for name, text in honest_texts() if name not in kernelbench]
    assert max(most_copies(t) for t in own) == 1
    assert max(most_copies(p.read_text()) for p in KERNELBENCH) == 2


# --------------------------------------------------------------------------- both engines

LOOP_PROMPT = "Write the imports of a Triton kernel file."
_LOOPER: dict = {}


def looper():
    """The tiny model trained (on CPU, a few seconds) to continue LOOP_PROMPT with the import line
    over and over, never ending: the loop the fine-tuned 135M model fell into on KernelBench."""
    if "model" not in _LOOPER:
        tok = load_tokenizer("tiny")
        model = load_base_model(load_config("smoke").model, "cpu", spec="tiny")
        p = tok(LOOP_PROMPT, add_special_tokens=False)["input_ids"]
        c = tok("\n```python\n" + IMPORT * 24, add_special_tokens=False)["input_ids"]
        ids, labels = torch.tensor([p + c]), torch.tensor([[-100] * len(p) + c])
        torch.manual_seed(0)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        for _ in range(300):
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            if loss.item() < 0.02:
                break
        model.eval()
        _LOOPER["model"], _LOOPER["tok"] = model, tok
    return _LOOPER["model"], _LOOPER["tok"]


@pytest.mark.parametrize("engine", ["lean", "hf"])
def test_both_engines_stop_a_looping_model_and_count_it(engine):
    model, tok = looper()
    r = Rollout(model, tok, engine=engine)
    s = SamplingConfig(n_samples=2, max_new_tokens=400, temperature=0.0, batch_size=2)
    res = r.generate([LOOP_PROMPT], s)
    for c in res.flat():
        assert c.finish_reason == "loop"
        assert c.text.count(IMPORT) == 16 and c.text.endswith(IMPORT)
        assert c.num_tokens < 200
    assert res.stats.finish_reasons == {"loop": 2}
    # without the rule the same model goes on past the loop's sixteenth line
    stopped = res.flat()[0]
    free = r.generate([LOOP_PROMPT], SamplingConfig(max_new_tokens=stopped.num_tokens + 40, temperature=0.0,
                                                    loop_lines=0)).flat()[0]
    assert free.finish_reason != "loop" and free.num_tokens > stopped.num_tokens
    assert free.token_ids[:stopped.num_tokens] == stopped.token_ids


def test_the_engines_stop_a_loop_at_the_same_token():
    model, tok = looper()
    s = SamplingConfig(max_new_tokens=400, temperature=0.0)
    lean = Rollout(model, tok, engine="lean").generate([LOOP_PROMPT], s).flat()[0]
    hf = Rollout(model, tok, engine="hf").generate([LOOP_PROMPT], s).flat()[0]
    assert lean.token_ids == hf.token_ids and lean.finish_reason == hf.finish_reason == "loop"
