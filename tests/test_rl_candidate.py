"""An RL candidate as a dataclass, and samples.jsonl in the format rounds were written in before
candidates were objects: its lines read back and write out byte for byte, and a run whose round was
verified then resumes from it without verifying again."""

from __future__ import annotations

import json

import pytest

from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.train.rl.best_of_n import select_top_k, train_best_of_n, training_rows
from tritonrl_lib.train.rl.candidate import Candidate, as_candidate
from tritonrl_lib.train.rl.curriculum import Curriculum, CurriculumSettings
from tritonrl_lib.train.rl.log import policy_stats, read_rl_log
from tritonrl_lib.train.rl.run_frame import open_run

from rl_fixtures import prepare_run, smoke_config

NO_CODE = ('{"task_id": "%s", "stage": "none", "correct": false, "reason": "no_code", "reward": 0.0, '
           '"error": "no code block and no Python module in the completion", "errors": [], "cheat_flags": [], '
           '"ref_time_ms": null, "kernel_time_ms": null, "speedup": null, "timing": null, "review": false, '
           '"notes": [], "duration_s": 0.0, "phases": {}}')
RELU_OK = ('{"task_id": "builtin/L1/relu", "stage": "full", "correct": true, "reason": "ok", "reward": 0.7, '
           '"error": "", "errors": [{"name": "tiny", "stage": "tiny", "inputs": "float32[2, 12]", "launches": 1, '
           '"kernels": {"relu_kernel": 1}, "max_abs": 0.0, "max_rel": 0.0, "shape": [2, 12], "dtype": "float32", '
           '"ok": true}], "cheat_flags": [], "ref_time_ms": null, "kernel_time_ms": null, "speedup": null, '
           '"timing": null, "review": false, "notes": ["timing skipped: no GPU"], "duration_s": 0.155, '
           '"phases": {"reference": 0.056, "compile": 0.014, "tiny": 0.022, "full": 0.043, "worker_s": 0.002}}')
RELU_MODULE = "```python\\nimport torch\\nimport triton\\n\\n@triton.jit\\ndef relu_kernel(x_ptr):\\n    pass\\n```"

# samples.jsonl lines as rounds wrote them before this change (a refined first attempt, the injected
# reference, the refinement, another task's sample), key order included.
TODAYS_LINES = [
    '{"task_id": "builtin/L1/relu", "level": 1, "group": 0, "sample_index": 0, "turn": 0, "injected": false, '
    '"text": " weight mask shape", "num_tokens": 32, "finish_reason": "length", "seconds": 0.547, '
    f'"verdict": {NO_CODE % "builtin/L1/relu"}, "reward": 0.0, "first_reward": 0.0}}',
    '{"task_id": "builtin/L1/relu", "level": 1, "group": 0, "sample_index": 2, "turn": 0, "injected": true, '
    f'"text": "{RELU_MODULE}", "num_tokens": 0, "finish_reason": "injected", "seconds": 0.0, '
    f'"verdict": {RELU_OK}, "reward": 0.7}}',
    '{"task_id": "builtin/L1/relu", "level": 1, "group": 0, "sample_index": 0, "turn": 1, "injected": false, '
    '"text": " tl.load mask", "num_tokens": 32, "finish_reason": "length", "seconds": 0.0253, "parent": "0:0", '
    '"history": [[" weight mask shape", {"stage": "none", "reason": "no_code", "error": "no code block and no '
    f'Python module in the completion"}}]], "verdict": {NO_CODE % "builtin/L1/relu"}, "reward": 0.0}}',
    '{"task_id": "builtin/L1/add", "level": 1, "group": 1, "sample_index": 0, "turn": 0, "injected": false, '
    '"text": " sigmoid 1024", "num_tokens": 32, "finish_reason": "eos", "seconds": 0.547, '
    f'"verdict": {NO_CODE % "builtin/L1/add"}, "reward": 0.0}}',
]


def line_of(c: Candidate) -> str:
    return json.dumps(c.to_dict(), ensure_ascii=False, default=str)  # as core/jsonio.py writes a line


def test_todays_samples_lines_read_back_and_write_out_the_same():
    cands = [Candidate.from_dict(json.loads(line)) for line in TODAYS_LINES]
    assert [line_of(c) for c in cands] == TODAYS_LINES
    first, injected, refined, other = cands
    assert first.policy_first_attempt and not first.correct and first.first_reward == 0.0 and first.key == "0:0"
    assert injected.injected and injected.correct and injected.reward == 0.7 and not injected.policy_first_attempt
    assert refined.parent == first.key and refined.history == [[first.text, {k: first.verdict[k] for k in
                                                                             ("stage", "reason", "error")}]]
    assert refined.history[0] == first.history_entry()
    assert other.token_ids == [] and "token_ids" not in other.to_dict()  # never written
    assert as_candidate(first) is first and as_candidate(json.loads(TODAYS_LINES[0])) == first
    stats = policy_stats(cands)
    assert stats["samples"] == 2 and stats["correct"] == 0 and stats["by_task"] == {
        "builtin/L1/relu": [0, 1], "builtin/L1/add": [0, 1]}


def test_selection_and_training_rows_take_candidates_or_their_lines():
    cands = [Candidate.from_dict(json.loads(line)) for line in TODAYS_LINES]
    assert select_top_k(cands, 2) == [cands[1]]
    as_dicts = [json.loads(line) for line in TODAYS_LINES]
    assert select_top_k(as_dicts, 2) == [as_dicts[1]]  # what was given comes back
    assert cands[1].kept_record() == {"task_id": "builtin/L1/relu", "sample_index": 2, "turn": 0, "injected": True,
                                      "text": cands[1].text, "history": None, "reward": 0.7, "speedup": None}
    suite = {t.id: t for t in load_tasks("builtin", size="small")}
    rows = training_rows([cands[2]], suite)
    assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user", "assistant", "user"]
    assert rows[0]["completion"] == [{"role": "assistant", "content": "tl.load mask"}]
    assert training_rows([as_dicts[2]], suite) == rows


class NoPool:
    """A verifier pool that must not be used: the round's verdicts are on disk."""

    def map(self, *a, **kw):
        raise AssertionError("a round verified before was verified again")


@pytest.mark.slow
def test_a_round_written_in_todays_format_resumes_without_verifying(tmp_path):
    cfg = smoke_config(tmp_path, rl_tasks="builtin/L1/relu,builtin/L1/add", tasks_per_round=2, n_samples=2,
                       top_k=1, rounds=1)
    prepare_run(cfg)
    run = open_run(cfg, None, "best_of_n", tasks=None, force=False, say=lambda s: None)  # the run's rl_state
    drawn = Curriculum(CurriculumSettings.from_config(cfg.rl), cfg.seed).sample_tasks(
        run.by_level, 2, rng=Curriculum(CurriculumSettings.from_config(cfg.rl), cfg.seed).rng(0))
    ids = [t.id for t in drawn]
    files = cfg.paths.rl_round(0)
    files.dir.mkdir(parents=True)
    files.samples.write_text("".join(line + "\n" for line in TODAYS_LINES), encoding="utf-8")
    info = {"tasks": ids, "signal": {"rule": "a correct candidate to keep", "groups": 2, "with_signal": 1,
                                     "first_draw_with_signal": 1, "drawn": 2, "redraw_rounds": 0, "replaced": 0},
            "refine": {"turns": 1, "refined": 2, "candidates": 1, "correct": 0, "fixed": 0, "discount": 0.8},
            "timing": {"generate_s": 0.06, "verify_s": 2.394, "verify_wait_s": 2.397, "refine_generate_s": 0.09,
                       "collect_s": 2.551},
            "verify": {"candidates": 4, "unique": 4, "duplicates": 0, "seconds": 2.394, "per_minute": 100.2,
                       "unique_per_minute": 100.2},
            "rollout": {"engine": "lean", "tokens": 96, "seconds": 0.15, "tokens_per_s": 640.0,
                        "finish_reasons": {"length": 2, "eos": 1}, "sequences": 3, "cuda_graphs": 0, "note": ""}}
    files.meta.write_text(json.dumps({"round": 0, "verified": True, "drawn": ids, "task_ids": ids,
                                      "scoring_only": False, "info": info}, indent=2) + "\n")
    before = files.samples.read_bytes()

    messages: list[str] = []
    res = train_best_of_n(cfg, pool=NoPool(), echo=messages.append)
    assert res.status == "trained" and res.rounds_done == 1
    assert any("reusing its 4 verified candidates" in m for m in messages)
    assert files.samples.read_bytes() == before
    (kept,) = read_jsonl(files.kept)
    assert kept == Candidate.from_dict(json.loads(TODAYS_LINES[1])).kept_record()
    (rec,) = read_rl_log(cfg.paths)
    assert rec["samples"] == 2 and rec["correct"] == 0 and rec["injected"] == 1 and rec["kept"] == 1
    assert rec["by_task"] == {"builtin/L1/relu": [0, 1], "builtin/L1/add": [0, 1]}
    assert rec["timing"]["reused"] and rec["train"]["examples"] == 1
