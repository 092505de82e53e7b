"""Rollouts from real models (the tiny Qwen2 model, CPU): both engines agree with the model's own
forward and with each other, left padding and batching change nothing, a fence-closing code
block stops a completion (and its opening fence does not), seeds reproduce, n samples per prompt."""

from __future__ import annotations

import io
import re

import pytest
import torch

from tritonrl_lib.core.config import load_config
from tritonrl_lib.verify.extract import extract_code
from tritonrl_lib.model.load import load_base_model, load_policy, load_tokenizer
from tritonrl_lib.rollout import (
    FenceStop,
    LeanDecoder,
    Rollout,
    SamplingConfig,
    UnsupportedModel,
    closes_code_block,
    rollout,
    stop_token_ids,
    token_pieces,
)
from tritonrl_lib.rollout import batches, lean_check
from tritonrl_lib.rollout.batches import Progress
from tritonrl_lib.rollout.stopping import SequenceTracker
from tritonrl_lib.run.progress import describe_bar


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Two cores shared by several processes: one BLAS thread each is several times faster.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cfg():
    return load_config("smoke")


def chat(tok, text: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)


@pytest.fixture(scope="module")
def scrambled(cfg):
    """The tiny model with LoRA attached and every weight redrawn large, so greedy decoding is
    far from degenerate and any error in positions, padding or the LoRA merge changes tokens."""
    model, tok = load_policy(cfg, trainable=True)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3, generator=g)
            elif "norm" not in name and "lora" not in name:
                p.normal_(0, 0.15, generator=g)
    model.eval()
    prompts = [chat(tok, "write relu " * k) for k in (1, 3, 7)]
    return model, tok, prompts


GREEDY = dict(temperature=0.0, stop_at_fence=False)


def token_lists(result):
    return [[c.token_ids for c in group] for group in result.completions]


# --------------------------------------------------------------------------- the engine is the model


def test_lean_engine_matches_the_models_forward(scrambled):
    model, tok, prompts = scrambled
    lean = LeanDecoder(model)
    ids = tok(prompts[2], add_special_tokens=False)["input_ids"]
    assert lean.check_against(model, ids) < 1e-5


@pytest.mark.parametrize("engine", ["lean", "hf"])
def test_batched_greedy_equals_single_prompt_greedy(scrambled, engine):
    model, tok, prompts = scrambled
    r = Rollout(model, tok, engine=engine)
    assert r.engine_name == engine
    s = SamplingConfig(n_samples=2, max_new_tokens=24, batch_size=6, **GREEDY)
    batched = token_lists(r.generate(prompts, s))  # prompts of 3 lengths share a batch
    for i, p in enumerate(prompts):
        alone = r.generate([p], SamplingConfig(n_samples=1, max_new_tokens=24, **GREEDY)).completions[0][0]
        assert batched[i][0] == alone.token_ids
        assert batched[i][1] == alone.token_ids  # greedy: every sample identical
    assert len(set(tuple(b[0]) for b in batched)) == 3


def test_lean_and_hf_engines_agree_with_a_trained_lora(scrambled):
    model, tok, prompts = scrambled
    s = SamplingConfig(n_samples=1, max_new_tokens=30, batch_size=3, **GREEDY)
    lean = token_lists(Rollout(model, tok, engine="lean").generate(prompts, s))
    hf = token_lists(Rollout(model, tok, engine="hf").generate(prompts, s))
    assert lean == hf


def test_refresh_follows_training(scrambled):
    model, tok, prompts = scrambled
    r = Rollout(model, tok, engine="lean")
    s = SamplingConfig(n_samples=1, max_new_tokens=16, **GREEDY)
    before = token_lists(r.generate(prompts[:1], s))
    saved = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n}
    try:
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.mul_(-2.0)
        stale = token_lists(r.generate(prompts[:1], s))
        r.refresh()
        fresh = token_lists(r.generate(prompts[:1], s))
        want = token_lists(Rollout(model, tok, engine="hf").generate(prompts[:1], s))
    finally:
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n in saved:
                    p.copy_(saved[n])
    assert stale == before  # the engine holds its own weights until refreshed
    assert fresh == want and fresh != before


# --------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("engine", ["lean", "hf"])
def test_seeds_reproduce_and_differ(scrambled, engine):
    model, tok, prompts = scrambled
    r = Rollout(model, tok, engine=engine)

    def run(seed):
        s = SamplingConfig(n_samples=3, temperature=1.0, top_p=0.9, max_new_tokens=12, seed=seed,
                           stop_at_fence=False, batch_size=9)
        return token_lists(r.generate(prompts, s))

    a, b, c = run(1), run(1), run(2)
    assert a == b
    assert a != c
    assert any(len({tuple(x) for x in group}) > 1 for group in a)  # samples of a prompt differ


def test_n_samples_per_prompt_across_batches(scrambled):
    model, tok, prompts = scrambled
    s = SamplingConfig(n_samples=5, temperature=1.0, max_new_tokens=6, batch_size=4, stop_at_fence=False)
    res = rollout(model, tok, prompts, s)
    assert len(res.completions) == 3
    for i, group in enumerate(res.completions):
        assert [c.sample_index for c in group] == list(range(5))
        assert all(c.prompt_index == i and c.num_tokens == len(c.token_ids) for c in group)
        assert all(c.prompt_tokens == len(tok(prompts[i], add_special_tokens=False)["input_ids"]) for c in group)
    assert res.stats.sequences == 15 and res.stats.batches == 4  # 15 sequences in batches of 4
    assert res.stats.generated_tokens == sum(c.num_tokens for c in res.flat())
    assert all(c.finish_reason in ("eos", "length") for c in res.flat())


def test_logprobs_match_a_forward_pass(scrambled):
    model, tok, prompts = scrambled
    s = SamplingConfig(n_samples=2, temperature=0.7, max_new_tokens=10, stop_at_fence=False,
                       return_logprobs=True, seed=3)
    res = Rollout(model, tok, engine="lean").generate(prompts[:2], s)
    for c in res.flat():
        ids = tok(prompts[c.prompt_index], add_special_tokens=False)["input_ids"] + c.token_ids
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, c.prompt_tokens - 1:-1] / 0.7
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-4)


def test_finished_rows_compact_without_changing_the_rest(cfg):
    """Sequences that stop early are dropped from the decode batch (8-row buckets); the rows that
    go on produce exactly what they produce alone."""
    model, tok = memorised(cfg)
    short = chat(tok, MEMO_PROMPT)  # stops at the fence after ~15 tokens
    other = RAW_PROMPT  # memorised with a continuation longer than max_new_tokens: runs to the length
    r = Rollout(model, tok, engine="lean")
    s = SamplingConfig(n_samples=6, max_new_tokens=40, batch_size=12, **{**GREEDY, "stop_at_fence": True})
    res = r.generate([short, other], s)
    assert all(c.finish_reason == "fence" for c in res.completions[0])
    assert all(c.finish_reason == "length" for c in res.completions[1])
    assert res.stats.compactions >= 1
    alone = r.generate([other], SamplingConfig(n_samples=1, max_new_tokens=40, **{**GREEDY, "stop_at_fence": True}))
    assert all(c.token_ids == alone.completions[0][0].token_ids for c in res.completions[1])


# --------------------------------------------------------------------------- progress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def bar_states(text: str) -> list[str]:
    """Every state a tqdm bar drew (it redraws its line after a carriage return)."""
    return [s.strip() for s in re.split(r"[\r\n]", text) if "%|" in s]


def test_progress_tells_tokens_rate_and_time_left_before_a_sequence_ends():
    clock, out = Clock(), io.StringIO()
    with Progress(total=4, max_new=100, enabled=True, batches=2, every_s=10.0, file=out, clock=clock) as prog:
        prog.start_batch()
        prog.advance(10, 20)
        clock.t += 5
        prog.tick()  # 5 s: not yet
        assert all("tokens=" not in s for s in bar_states(out.getvalue()))
        prog.advance(10, 30)
        clock.t += 5
        prog.tick()  # 10 s, 20 steps, no sequence done: this batch may run to 100 steps, the next too
        line = bar_states(out.getvalue())[-1]
        assert line.endswith("0/4 [00:00, tokens=50, tok/s=5.0, left=01:30]"), line  # 180 steps of 0.5 s
        compact, finished, count = describe_bar(line)  # what `tritonrl run` shows of it
        assert count == "rollout: 0/4" and not finished and "tokens=50, tok/s=5.0, left=01:30" in compact
        prog.advance(10, 20)
        prog.finished()
        prog.finished()  # the first batch ended at step 30: the second is expected to last as long
        clock.t += 5
        prog.start_batch()
        prog.advance(5, 10)
        clock.t += 2.5
        assert prog.seconds_left() == pytest.approx((30 - 5) * 0.5)
        prog.advance(0, 12_340 - 90)
        assert prog.fields()["tokens"] == "12.3k"
    last = bar_states(out.getvalue())[-1]
    assert "2/4" in last and "tokens=12.3k" in last


@pytest.mark.parametrize("engine", ["lean", "hf"])
def test_generation_reports_progress_while_it_decodes(scrambled, engine, monkeypatch, capsys):
    """Both engines redraw the bar between decode steps (here at every step), so the tokens and the
    rate show before the first sequence ends; the last state counts every sequence and token."""
    model, tok, prompts = scrambled
    monkeypatch.setattr(batches, "PROGRESS_EVERY_S", 0.0)
    s = SamplingConfig(n_samples=2, max_new_tokens=20, batch_size=6, **GREEDY)
    res = Rollout(model, tok, engine=engine).generate(prompts, s, progress=True)
    states = bar_states(capsys.readouterr().err)
    early = [x for x in states if " 0/6 " in x and "tokens=" in x and "tokens=0," not in x]
    assert len(early) >= 5, states[:8]  # tokens counted, step by step, before any sequence ended
    tokens = [int(re.search(r"tokens=(\d+)", x)[1]) for x in early]
    assert tokens == sorted(tokens) and tokens[-1] < res.stats.generated_tokens
    assert re.search(r"tok/s=[\d.]+, left=\d\d:\d\d\]", early[-1])
    assert states[-1].startswith("rollout: 100%") and " 6/6 " in states[-1]
    assert f"tokens={res.stats.generated_tokens}," in states[-1]


# --------------------------------------------------------------------------- stopping at the code's end

FENCED = [
    # (completion text, where the stop must be: the text up to and including this marker)
    ("Here is the kernel:\n```python\nimport triton\nx = 1\n```\nIt adds numbers.", "x = 1\n```\n"),
    ("```python\ndef f():\n    return 1\n```\n\nExplanation below.", "return 1\n```\n"),
    ("Sure! ```python\nx = 2\n```\nmore", "x = 2\n```\n"),  # fence opened at the end of a prose line
    ("```py\nclass ModelNew:\n    pass```\ntrailing", "pass```\n"),  # glued closing fence
    ("````python\ns = '```'\n```\nstill code\n````\nafter", "still code\n````\n"),  # a longer fence
    ("```python\nprint('a')\n```python\nprint('b')\n```\nend", "print('b')\n```\n"),  # tagged line is not a close
]


@pytest.mark.parametrize("spec", ["tiny", "embedded"])
def test_fence_stop_on_real_token_sequences(spec):
    tok = load_tokenizer(spec)
    pieces = token_pieces(tok)
    eos = frozenset(stop_token_ids(object(), tok))
    for text, marker in FENCED:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        tr = SequenceTracker(0, 0, 0, fence=True)
        for token in ids:
            if tr.push(token, pieces[token], eos, max_new=10_000):
                break
        assert tr.reason == "fence", text
        got = tok.decode(tr.tokens)
        cut = text.index(marker) + len(marker)
        # the stop token is the one holding the newline after the closing fence
        assert got.startswith(text[:cut - 1]) and len(got) <= cut + 4, (text, got)
        assert closes_code_block(got)


@pytest.mark.parametrize("text", [
    "```python\nimport triton\n",  # open, never closed
    "Here is how:\n```python",  # the opening fence alone
    "no code at all\n",
    "inline ```code``` only\n",
])
def test_no_stop_without_a_closing_fence(text):
    det = FenceStop()
    for ch in text:
        det.feed(ch)
    assert not det.done


def test_stopped_text_extracts_as_a_closed_block():
    tok = load_tokenizer("tiny")
    pieces = token_pieces(tok)
    for text, _ in FENCED:
        tr = SequenceTracker(0, 0, 0, fence=True)
        for token in tok(text, add_special_tokens=False)["input_ids"]:
            if tr.push(token, pieces[token], frozenset(), 10_000):
                break
        ex = extract_code(tok.decode(tr.tokens))
        assert ex.reason == "ok" and ex.method in ("fenced", "merged"), (text, ex)


MEMO_PROMPT = "relu please"
MEMO_COMPLETION = "Sure:\n```python\nx = torch.relu(x)\n```\nThat is all, it returns x."
# a raw prompt, outside the chat format, memorised with a long continuation and no end-of-turn: it
# runs to max_new_tokens whatever the tiny model's random weights would otherwise have said
RAW_PROMPT = "Once upon a time, in a grid of kernels,"
RAW_CONTINUATION = " every program loaded its block, added one to it and stored it back." * 6
_MEMO: dict = {}


def memorised(cfg):
    """The tiny model trained (really, on CPU, a few seconds) to answer MEMO_PROMPT with a fenced
    block followed by prose and an end-of-turn: a model that writes a closing fence by itself; and to
    continue RAW_PROMPT with prose that never ends in time (a sequence that runs to its length)."""
    if "model" not in _MEMO:
        tok = load_tokenizer("tiny")
        model = load_base_model(cfg.model, "cpu", spec="tiny")
        rows = []
        for prompt, answer in ((chat(tok, MEMO_PROMPT), MEMO_COMPLETION + tok.eos_token),
                               (RAW_PROMPT, RAW_CONTINUATION)):
            p = tok(prompt, add_special_tokens=False)["input_ids"]
            c = tok(answer, add_special_tokens=False)["input_ids"]
            rows.append((torch.tensor([p + c]), torch.tensor([[-100] * len(p) + c])))
        torch.manual_seed(0)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        for _ in range(300):
            losses = [model(input_ids=ids, labels=labels).loss for ids, labels in rows]
            opt.zero_grad()
            sum(losses).backward()
            opt.step()
            if max(loss.item() for loss in losses) < 0.02:
                break
        model.eval()
        _MEMO["model"], _MEMO["tok"] = model, tok
    return _MEMO["model"], _MEMO["tok"]


@pytest.mark.parametrize("engine", ["lean", "hf"])
def test_generation_stops_at_the_closing_fence_not_the_opening_one(cfg, engine):
    model, tok = memorised(cfg)
    r = Rollout(model, tok, engine=engine)
    prompt = chat(tok, MEMO_PROMPT)
    stopped = r.generate([prompt], SamplingConfig(max_new_tokens=60, **{**GREEDY, "stop_at_fence": True}))
    c = stopped.completions[0][0]
    assert c.finish_reason == "fence"
    assert c.text == "Sure:\n```python\nx = torch.relu(x)\n```\n"
    assert extract_code(c.text).code == "x = torch.relu(x)\n"
    # without the stop rule the same model goes on to its prose and end-of-turn
    free = r.generate([prompt], SamplingConfig(max_new_tokens=60, **GREEDY)).completions[0][0]
    assert free.finish_reason == "eos" and free.text == MEMO_COMPLETION
    assert free.token_ids[:c.num_tokens] == c.token_ids


# --------------------------------------------------------------------------- other models


def test_unsupported_architecture_uses_generate(cfg):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = load_tokenizer("tiny")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=512, n_embd=32, n_layer=2, n_head=2,
                                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)).eval()
    with pytest.raises(UnsupportedModel, match="model_type"):
        Rollout(model, tok, engine="lean")
    r = Rollout(model, tok, engine="auto")
    assert r.engine_name == "hf" and "gpt2" in r.note
    res = r.generate([chat(tok, "hi"), chat(tok, "hello there")], SamplingConfig(n_samples=2, max_new_tokens=5))
    assert res.stats.engine == "hf" and res.stats.sequences == 4


def test_settings_are_checked():
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)
    with pytest.raises(ValueError, match="engine"):
        SamplingConfig(engine="vllm")
    cfg = load_config("cpu", {"max_new_tokens": 77, "rollout_batch_size": 5, "temperature": 0.6})
    s = SamplingConfig.from_config(cfg, n_samples=10)  # the call's own value wins over the profile's
    assert (s.n_samples, s.max_new_tokens, s.batch_size, s.temperature) == (10, 77, 5, 0.6)
    assert SamplingConfig.from_config(cfg).n_samples == cfg.rl.n_samples


@pytest.mark.slow
def test_embedded_model_lean_engine_matches_generate():
    """The real SmolLM2 (Llama architecture) on CPU: the lean engine's greedy tokens equal
    model.generate's."""
    cfg = load_config("cpu")
    model, tok = load_policy(cfg, trainable=False)
    prompt = chat(tok, "Write a Triton kernel that adds two vectors.")
    s = SamplingConfig(n_samples=1, max_new_tokens=24, **GREEDY)
    lean = Rollout(model, tok, engine="lean")
    assert lean.engine_name == "lean"
    assert token_lists(lean.generate([prompt], s)) == token_lists(Rollout(model, tok, engine="hf").generate([prompt], s))


# --------------------------------------------------------------------------- the engine's self-check


def test_in_float32_an_engine_that_agrees_has_nothing_to_say(scrambled):
    """The note is for what a reader must know (a fallback, a half-precision gap settled in float32),
    not the float32 rule holding: an evaluation's log prints it beside the engine's name."""
    model, tok, _ = scrambled
    assert next(model.parameters()).dtype == torch.float32
    r = Rollout(model, tok, engine="auto", cuda_graphs=False)
    assert r.engine_name == "lean" and r.note == ""


@pytest.fixture(scope="module")
def scrambled_bf16(scrambled):
    import copy

    model, tok, prompts = scrambled
    return copy.deepcopy(model).to(torch.bfloat16), tok, prompts


def test_in_half_precision_a_gap_is_settled_against_float32(scrambled_bf16, monkeypatch):
    """bf16 rounding alone separates the engine from the model's own bf16 forward; with the direct
    tolerance set below that gap, the float32 comparison still accepts the engine, and says so."""
    model, tok, prompts = scrambled_bf16
    lean = LeanDecoder(model, use_graphs=False)
    ids = tok(prompts[2], add_special_tokens=False)["input_ids"]
    gap = lean.check_against(model, ids)
    assert gap > 1e-3  # half precision: the two computations round differently
    monkeypatch.setattr(lean_check, "HALF_TOL", gap / 10)
    ok, why = lean_check.lean_agrees(lean, model, ids)
    assert ok and "float32 forward" in why
    r = Rollout(model, tok, engine="auto", cuda_graphs=False)
    assert r.engine_name == "lean" and "checked against float32" in r.note


def _engines_off_by_one_projection(monkeypatch):
    """A mistake in the engine's code, made by every engine built (float32 ones too): layer 0's output
    projection 1.5 times what the model holds."""
    original = LeanDecoder.__init__

    def built_wrong(self, *args, **kwargs):
        original(self, *args, **kwargs)
        with torch.no_grad():
            self.layers[0]["wo"].mul_(1.5)

    monkeypatch.setattr(LeanDecoder, "__init__", built_wrong)


def test_an_engine_that_computes_something_else_is_refused_in_half_precision(scrambled_bf16, monkeypatch):
    model, tok, prompts = scrambled_bf16
    _engines_off_by_one_projection(monkeypatch)
    lean = LeanDecoder(model, use_graphs=False)
    ids = tok(prompts[2], add_special_tokens=False)["input_ids"]
    gap = lean.check_against(model, ids)
    monkeypatch.setattr(lean_check, "HALF_TOL", min(0.1, gap / 10))
    ok, why = lean_check.lean_agrees(lean, model, ids)
    assert not ok and "float32 forward" in why, why  # 24 times the model's own gap: past the cap
    # within the cap, the engine built from the float32 model makes the same mistake, and says so
    monkeypatch.setattr(lean_check, "HALF_CAP_MARGIN", 1000.0)
    ok, why = lean_check.lean_agrees(lean, model, ids)
    assert not ok and "not rounding" in why, why
    r = Rollout(model, tok, engine="auto", cuda_graphs=False)
    assert r.engine_name == "hf" and "lean engine not used" in r.note
    monkeypatch.setattr(lean_check, "FP32_ARBITER_MAX_PARAMS", 10)  # too large for a float32 copy: refused
    ok, why = lean_check.lean_agrees(lean, model, ids)
    assert not ok and "too large" in why


def test_a_half_precision_gap_past_the_margin_is_settled_by_the_engine_in_float32(scrambled_bf16, monkeypatch):
    """Seen on an H200: an r=64 adapter's merged bf16 weights put the engine 2.3 times as far from the
    float32 forward as the model's own bf16 forward, and the engine was refused (13x slower sampling).
    Rounding it is: built from the float32 model, the engine agrees with it, so it is accepted, and says so."""
    model, tok, prompts = scrambled_bf16
    lean = LeanDecoder(model, use_graphs=False)
    ids = tok(prompts[2], add_special_tokens=False)["input_ids"]
    gap = lean.check_against(model, ids)
    monkeypatch.setattr(lean_check, "HALF_TOL", gap / 10)
    monkeypatch.setattr(lean_check, "HALF_MARGIN", 0.0)  # the margin alone would refuse it now
    ok, why = lean_check.lean_agrees(lean, model, ids)
    assert ok and "agrees with that model's forward" in why, why
    r = Rollout(model, tok, engine="auto", cuda_graphs=False)
    assert r.engine_name == "lean" and "checked against float32" in r.note


def test_a_fault_of_the_half_precision_path_alone_is_refused(scrambled_bf16, monkeypatch):
    """A float32 engine cannot vouch for a half-precision one that is wrong in half precision only: one
    projection off in the bf16 engine (24 times the model's own gap) or NaN logits are refused outright."""
    model, tok, prompts = scrambled_bf16
    ids = tok(prompts[2], add_special_tokens=False)["input_ids"]
    for fault in (lambda w: w.mul_(1.5), lambda w: w.fill_(float("nan"))):
        lean = LeanDecoder(model, use_graphs=False)
        with torch.no_grad():
            fault(lean.layers[0]["wo"])
        monkeypatch.setattr(lean_check, "HALF_TOL", 1e-4)
        ok, why = lean_check.lean_agrees(lean, model, ids)
        assert not ok and "float32 forward" in why and "built from the float32 model" not in why, why


def test_a_float32_check_that_fails_leaves_sampling_to_model_generate(scrambled_bf16, monkeypatch):
    model, tok, prompts = scrambled_bf16
    monkeypatch.setattr(lean_check, "HALF_TOL", 1e-6)

    def out_of_memory(*a, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(lean_check, "_settled_in_float32", out_of_memory)
    r = Rollout(model, tok, engine="auto", cuda_graphs=False)
    assert r.engine_name == "hf" and "float32 check failed" in r.note and "out of memory" in r.note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graphs_survive_a_larger_cache_and_sampling_goes_on(scrambled):
    """Growing the KV cache drops the captured graphs; the next capture must open a pool of its own
    (reusing the freed pool's handle tripped the allocator's assert on a 7B stand-in, and the failed
    capture then broke every later random draw)."""
    import copy

    model, _tok, _prompts = scrambled
    lean = LeanDecoder(copy.deepcopy(model).to("cuda"), use_graphs=True)
    lean.ensure_cache(2, 128)
    first = lean.decode(2, 128).clone()
    assert lean.use_graphs and lean.graphs_captured == 1
    lean.ensure_cache(8, 256)  # a larger batch: graphs and their pool go
    lean.decode(8, 256)
    again = lean.decode(2, 128)
    assert lean.use_graphs and lean.graphs_captured == 3
    assert torch.allclose(first, again, atol=1e-3, rtol=1e-3)
    torch.multinomial(torch.softmax(again, -1), 1)  # the generator is not left capturing
