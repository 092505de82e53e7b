"""The SFT generator: verified, deduplicated, deterministic examples from train families only."""

from __future__ import annotations

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.data import generate as gen
from tritonrl_lib.data.generate import generate_sft_examples, make_candidate
from tritonrl_lib.data.records import SFTExample, read_sft_examples, write_jsonl
from tritonrl_lib.tasks.kb_format import module_constants, rewrite_constants
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.extract import extract_code
from tritonrl_lib.model.prompts import build_messages

from verifier_fixtures import PassEverything

FAMILIES = ["relu", "add", "softmax", "sum_dim", "gemm_bias_relu", "layer_norm_gelu"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from tritonrl_lib.verify import VerifierPool

    cache = tmp_path_factory.mktemp("verdicts")
    with VerifierPool(load_config("smoke").verify, cache=cache, progress=False) as p:
        yield p


def test_candidates_are_generated_tasks_with_their_completion():
    c = make_candidate("gemm_bias_relu", 0, 3)
    t = c.task
    assert t.origin == "generated" and t.op_family == "gemm_bias_relu" and t.category == "gemm_epilogue"
    assert t.level == 2 and t.id.startswith("generated/gemm_bias_relu/")
    assert extract_code(c.completion).code.strip() == c.solution.strip()
    assert make_candidate("gemm_bias_relu", 0, 3).key == c.key


def _published_candidate(family: str):
    return next(c for c in (make_candidate(family, 0, i) for i in range(1, 30))
                if c.prompt_task is not None and not c.task.meta["surface"].count("+inline"))


def test_a_published_scale_prompt_shows_the_verified_task_with_larger_constants():
    c = _published_candidate("relu")
    small, large = c.task.source, c.prompt_task.source
    assert small != large and c.prompt_task.id == c.task.id  # the verifier runs `task`; the prompt shows its twin
    meta = c.task.meta
    assert rewrite_constants(small, meta["published_shape"]) == large
    assert module_constants(small) == {**module_constants(small), **meta["shape"]}
    assert meta["published_numel"] > 10**6 > meta["numel"] and meta["published_scale"]
    assert (meta["published_numel"] >= 2**31 - 2**20) <= meta["int64_offsets"]
    ex = gen.to_sft_example(c.prompt_task, c.solution, c.variant, meta=meta)
    assert ex.source == large and ex.task_id == c.task.id and ex.meta["shape"] == meta["shape"]
    assert ex.prompt == build_messages(c.prompt_task)
    house = make_candidate("relu", 0, 0)  # example 0: the house style at the verified sizes
    assert house.prompt_task is None and house.task.meta["house_surface"] and not house.task.meta["published_scale"]


@pytest.mark.slow
def test_examples_are_verified_balanced_and_deterministic(pool):
    examples, stats = generate_sft_examples(FAMILIES, 12, seed=0, pool=pool, progress=False)
    assert len(examples) == 12 and stats.kept == 12
    assert all(isinstance(e, SFTExample) and e.verified for e in examples)
    assert {e.op_family for e in examples} == set(FAMILIES)  # round-robin: every family present
    assert max(stats.kept_by_family.values()) - min(stats.kept_by_family.values()) <= 1
    assert len({e.id for e in examples}) == 12
    for e in examples:
        assert e.prompt[1]["content"].endswith("```")
        assert e.prompt == build_messages(Task(id=e.task_id, level=e.level, name="", source=e.source))
        assert extract_code(e.completion[0]["content"]).code.strip() == e.solution.strip()
        assert e.level in (1, 2) and e.category
        assert {"shape", "published_shape", "numel", "published_numel", "int64_offsets"} <= set(e.meta)
        if e.meta["published_scale"]:  # the prompt shows published sizes; the verifier ran the small twin
            assert e.meta["published_numel"] > e.meta["numel"]
    assert any(e.meta["published_scale"] for e in examples)
    again, stats2 = generate_sft_examples(FAMILIES, 12, seed=0, pool=pool, progress=False)
    assert [e.to_dict() for e in again] == [e.to_dict() for e in examples]
    assert stats2.cache_hits == stats2.verified  # the second pass read every verdict from the cache
    other, _ = generate_sft_examples(FAMILIES, 12, seed=1, pool=pool, progress=False)
    assert [e.id for e in other] != [e.id for e in examples]


@pytest.mark.slow
def test_candidates_the_verifier_rejects_are_dropped_and_counted(pool, monkeypatch):
    """A broken template (its kernel computes the wrong thing) loses every example to the real
    verifier, by reason; the healthy family still delivers."""
    real = gen.make_candidate

    def broken_for_relu(family, seed, index):
        c = real(family, seed, index)
        if family != "relu":
            return c
        wrong = c.solution.replace("tl.maximum(", "tl.minimum(").replace("> 0,", "< 0,")
        return gen.Candidate(c.task, gen.format_completion(wrong), wrong, c.variant, c.key + "x")

    monkeypatch.setattr(gen, "make_candidate", broken_for_relu)
    examples, stats = generate_sft_examples(["relu", "add"], 4, seed=0, pool=pool, progress=False,
                                            max_candidates=12)
    assert {e.op_family for e in examples} == {"add"} and len(examples) == 4
    assert stats.failures and all(r.startswith("mismatch") for r in stats.failures)
    assert stats.kept_by_family == {"add": 4}
    assert stats.n_failed == (stats.verified + 1) // 2  # candidates alternate relu, add: every relu lost
    # which family lost them, and what the verifier said, are kept and said (the data stage's message)
    assert set(stats.failed_by_family) == {"relu"} and sum(stats.failed_by_family["relu"].values()) == stats.n_failed
    reason = next(iter(stats.failures))
    assert "values differ" in stats.first_errors[reason]
    assert stats.starved_families() == ["relu"]
    msg = stats.starved_message()
    assert msg.startswith("1 of 2 train families kept almost nothing: relu (0 kept)") and reason in msg
    assert stats.to_dict()["failed_by_family"] == {"relu": dict(stats.failed_by_family["relu"])}


def test_duplicates_are_skipped_before_verification(monkeypatch):
    """A template that keeps producing the same pair is deduplicated, then retired."""
    real = gen.make_candidate
    monkeypatch.setattr(gen, "make_candidate", lambda family, seed, index: real(family, seed, 0))
    stats = gen.GenerationStats(requested=5)
    cands = list(gen._candidates(["relu"], 0, stats, limit=100))
    assert len(cands) == 1
    assert stats.duplicates == gen.MAX_CONSECUTIVE_DUPLICATES and stats.exhausted_families == ["relu"]


def test_bad_family_lists_are_errors():
    with pytest.raises(ValueError, match="no template for families"):
        generate_sft_examples(["relu", "nope"], 3, progress=False)
    with pytest.raises(ValueError, match="no families"):
        generate_sft_examples([], 3, progress=False)
    examples, stats = generate_sft_examples(["relu"], 0, progress=False)
    assert examples == [] and stats.kept == 0


def test_records_round_trip_and_load_with_datasets(tmp_path):
    from datasets import load_dataset

    c1, c2 = make_candidate("relu", 0, 1), _published_candidate("gemm_bias_relu")
    examples = [gen.to_sft_example(c.prompt_task or c.task, c.solution, c.variant, meta=c.task.meta)
                for c in (c1, c2)]
    examples.append(gen.to_sft_example(c1.task, c1.solution, "kernelbook"))  # no meta, as KernelBook rows
    path = tmp_path / "sft_train.jsonl"
    assert write_jsonl(path, examples) == 3
    assert read_sft_examples(path) == examples
    ds = load_dataset("json", data_files=str(path), split="train")
    assert ds.column_names[:8] == ["id", "task_id", "origin", "op_family", "category", "level", "prompt",
                                   "completion"]
    row = ds[1]
    assert row["prompt"] == build_messages(c2.prompt_task)
    assert row["meta"]["published_shape"] == c2.task.meta["published_shape"] and ds[2]["meta"] in ({}, None)
    assert row["completion"][0]["role"] == "assistant"
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(ValueError, match="sft_train.jsonl:4"):
        read_sft_examples(path)


def test_family_weights_resolve_categories_families_and_errors():
    fams = ["relu", "gemm_chain", "conv_chain", "gemm_reduce"]
    w = gen.family_weights(fams, ["epilogue_chain:3", "conv_chain:2"])
    assert w == {"relu": 1, "gemm_chain": 3, "conv_chain": 2, "gemm_reduce": 1}  # a family's own entry wins
    assert gen.family_weights(fams, []) == dict.fromkeys(fams, 1)
    with pytest.raises(ValueError, match="neither an op family nor a category"):
        gen.family_weights(fams, ["chains:3"])
    with pytest.raises(ValueError, match="N >= 1"):
        gen.family_weights(fams, ["relu:0"])


def test_a_weighted_family_gives_its_weight_in_candidates_every_round():
    stats = gen.GenerationStats(requested=0)
    cands = list(gen._candidates(["relu", "gemm_chain"], 0, stats, limit=12, weights={"relu": 1, "gemm_chain": 3}))
    fams = [c.task.op_family for c in cands]
    assert fams == ["relu", "gemm_chain", "gemm_chain", "gemm_chain"] * 3
    # example i of a family is the same whatever the weights: its key is (seed, family, i)
    plain = list(gen._candidates(["relu", "gemm_chain"], 0, gen.GenerationStats(requested=0), limit=6))
    assert [c.key for c in plain if c.task.op_family == "gemm_chain"] == \
        [c.key for c in cands if c.task.op_family == "gemm_chain"][:3]


def test_generate_sft_examples_gives_a_weighted_category_its_weight():
    examples, stats = generate_sft_examples(["relu", "gemm_chain", "conv_chain"], 10, seed=0, pool=PassEverything(),
                                            progress=False, weights=["epilogue_chain:3"])
    assert [e.op_family for e in examples] == ["relu"] + ["gemm_chain"] * 3 + ["conv_chain"] * 3 + ["relu"] \
        + ["gemm_chain"] * 2
    assert stats.kept_by_family == {"relu": 2, "gemm_chain": 5, "conv_chain": 3}


def test_a_weighted_family_retired_in_the_middle_of_its_round_ends_there(monkeypatch):
    """A family whose template repeats itself is retired after its 40th duplicate, possibly inside one of its
    weighted rounds; the round goes on with the others."""
    real = gen.make_candidate
    monkeypatch.setattr(gen, "make_candidate",
                        lambda family, seed, index: real(family, seed, 0 if family == "gemm_chain" else index))
    stats = gen.GenerationStats(requested=0)
    cands = list(gen._candidates(["relu", "gemm_chain"], 0, stats, limit=200, weights={"relu": 1, "gemm_chain": 3}))
    assert stats.exhausted_families == ["gemm_chain"] and stats.candidates == 200
    assert [c.task.op_family for c in cands].count("gemm_chain") == 1  # its first; the rest were duplicates
    assert len(cands) == 1 + 200 - 1 - gen.MAX_CONSECUTIVE_DUPLICATES  # every later one is relu's


class FailSomePool:
    """Fails a candidate by its own code (a quarter of them, the same ones whatever the order), and records the
    size of every batch it is given."""

    size = 4

    def __init__(self):
        self.batches = []

    def map(self, tasks, completions, progress=False, desc="verify"):
        import hashlib

        from tritonrl_lib.verify.verdict import Verdict

        self.batches.append(len(completions))
        return [Verdict(correct=True, reason="ok") if hashlib.sha256(c.encode()).digest()[0] % 4
                else Verdict(correct=False, reason="mismatch", error="values differ") for c in completions]


def test_what_is_still_needed_is_verified_in_one_batch_and_keeps_the_same_examples():
    """Every candidate still needed goes to the pool at once (a batch waits for its slowest candidate, so
    each batch boundary idles the other workers); the examples kept are the first n the verifier passes in
    stream order, the same as with small batches."""
    fams = ["relu", "add", "softmax", "gemm_chain"]
    whole = FailSomePool()
    examples, stats = generate_sft_examples(fams, 100, seed=0, pool=whole, progress=False)
    assert stats.n_failed > 0 and len(examples) == 100
    assert whole.batches[0] == 100 + 100 // 8 + 2 * whole.size  # all of it, and an eighth more for the drops
    assert len(whole.batches) <= 2  # a second batch only where the first's drops outnumbered its spare eighth
    small = FailSomePool()
    same, _ = generate_sft_examples(fams, 100, seed=0, pool=small, progress=False, batch_size=3)
    assert len(small.batches) > 10
    assert [e.to_dict() for e in same] == [e.to_dict() for e in examples]
