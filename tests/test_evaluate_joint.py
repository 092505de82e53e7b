"""Several models evaluated together: each writes its completions, then every completion is verified in one
pass of the real pool, task by task; each model keeps its own record and resume folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval import resume as R
from tritonrl_lib.eval import run as E
from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.rollout.results import Completion
from tritonrl_lib.tasks import load_tasks

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def quiet(_msg: str) -> None:
    pass


def _made(texts):
    return [[Completion(prompt_index=i, sample_index=j, text=t, token_ids=[7] * 5, num_tokens=5, prompt_tokens=40,
                        finish_reason="eos", seconds=0.5) for j, t in enumerate(ts)] for i, ts in enumerate(texts)]


@pytest.fixture
def two_models(run_dir, monkeypatch):
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "ev", "eval_tasks": "builtin",
                                          "num_tasks": 2, "eval_k": 2})
    paths = cfg.paths.ensure()
    l1 = [t for t in load_tasks("builtin", levels=1) if t.reference_solution]
    tasks = [l1[0], next(t for t in l1 if t.op_family != l1[0].op_family)]
    ok0, ok1 = (format_completion(t.reference_solution) for t in tasks)
    texts = {"A": [[ok0, "no code here"], [ok0, ok1]],  # task 1's first sample solves task 0: wrong
             "B": [[ok0, ok0], ["no code here", ok1]]}
    generated: list[str] = []

    def fake_sample(cfg_, spec, tasks_, sampling, adapter=None, **kw):
        generated.append(adapter.name)
        return _made(texts[adapter.name]), {"wall_s": 1.0, "generated_tokens": 20}

    monkeypatch.setattr(E, "sample_model", fake_sample)
    models = [E.ModelToEval("sft", "tiny", Path("A"), paths.eval_file("sft")),
              E.ModelToEval("rl", "tiny", Path("B"), paths.eval_file("rl"))]
    return cfg, tasks, models, texts, generated


def _spy_on_passes(monkeypatch) -> list[tuple[list[str], list[str]]]:
    """Each verification pass's (task ids, texts) in the order verified, appended as the pool is called."""
    passes: list[tuple[list[str], list[str]]] = []
    real = E.verify_unique

    def spy(pool, flat_tasks, flat_text, **kw):
        passes.append(([t.id for t in flat_tasks], list(flat_text)))
        return real(pool, flat_tasks, flat_text, **kw)

    monkeypatch.setattr(E, "verify_unique", spy)
    return passes


def test_models_are_verified_in_one_pass_task_by_task(two_models, monkeypatch):
    cfg, tasks, models, texts, generated = two_models
    passes = _spy_on_passes(monkeypatch)
    said: list[str] = []
    a, b = E.evaluate_models(cfg, models, tasks, progress=False, log=said.append)
    assert generated == ["A", "B"] and len(passes) == 1  # both generated first, then one verification
    ids, order = passes[0]
    assert ids == [tasks[0].id] * 4 + [tasks[1].id] * 4
    assert order == texts["A"][0] + texts["B"][0] + texts["A"][1] + texts["B"][1]
    assert any("sft + rl: verifying 8 completions in one pass" in m for m in said), said
    # each model's record holds its own samples, in its own order, with its own verdicts
    assert [r["correct"] for r in a.record["detailed_results"]] == [True, False, False, True]
    assert [r["correct"] for r in b.record["detailed_results"]] == [True, True, False, True]
    assert [r["completion"] for r in b.record["detailed_results"]] == [t for ts in texts["B"] for t in ts]
    assert a.record["verified_with"] == ["rl"] and b.record["verified_with"] == ["sft"]
    assert a.record["verify"]["candidates"] == 4 and b.record["verify"]["unique"] == 3
    assert a.path.is_file() and b.path.is_file() and not list(a.path.parent.glob(".eval_*.resume-*"))
    # the same call again reuses both records
    again = E.evaluate_models(cfg, models, tasks, progress=False, log=quiet)
    assert [e.status for e in again] == ["reused", "reused"] and generated == ["A", "B"]


def test_verify_first_queues_the_named_tasks_first_and_each_verdict_lands_on_its_own_sample(two_models, monkeypatch):
    """eval.verify_first: the tasks whose id holds it are verified first (a cut evaluation has judged them
    whole); every record is the same as in the evaluation's own order."""
    cfg, tasks, models, texts, generated = two_models
    cfg.eval.verify_first = tasks[1].id
    passes = _spy_on_passes(monkeypatch)
    a, b = E.evaluate_models(cfg, models, tasks, progress=False, log=quiet)
    ids, order = passes[0]
    assert ids == [tasks[1].id] * 4 + [tasks[0].id] * 4
    assert order == texts["A"][1] + texts["B"][1] + texts["A"][0] + texts["B"][0]
    assert [r["correct"] for r in a.record["detailed_results"]] == [True, False, False, True]
    assert [r["correct"] for r in b.record["detailed_results"]] == [True, True, False, True]
    assert [r["completion"] for r in a.record["detailed_results"]] == [t for ts in texts["A"] for t in ts]


def test_a_joint_verification_cut_off_resumes_for_every_model(two_models, monkeypatch):
    cfg, tasks, models, texts, generated = two_models
    real_put = E.VerdictFolders.put

    def put_then_cut_off(self, key, verdict):  # the call ends right after the pool kept its first verdict
        real_put(self, key, verdict)
        raise KeyboardInterrupt

    monkeypatch.setattr(E.VerdictFolders, "put", put_then_cut_off)
    with pytest.raises(KeyboardInterrupt):
        E.evaluate_models(cfg, models, tasks, progress=False, log=quiet)
    folders = [next(m.out.parent.glob(f".{m.out.stem}.resume-*")) for m in models]
    # the first verdict (task 0's solution, which both models wrote) is kept in each model's own folder
    assert [len(list(R.verdicts_dir(f).rglob("*.json"))) for f in folders] == [1, 1]
    assert all(R.partial_path(f).is_file() for f in folders)

    monkeypatch.setattr(E.VerdictFolders, "put", real_put)
    monkeypatch.setattr(E, "sample_model", lambda *a, **kw: pytest.fail("generated again"))
    a, b = E.evaluate_models(cfg, models, tasks, progress=False, log=quiet)
    assert [r["correct"] for r in a.record["detailed_results"]] == [True, False, False, True]
    rows = [(e.model_stage, r) for e in (a, b) for r in e.record["detailed_results"]]
    cached = {(r["id"], r["completion"]) for _, r in rows if any("verdict from cache" in n for n in r["notes"])}
    assert len(cached) == 1  # the one verdict kept before the cut, found again for every sample of that code
    (pair,) = cached
    same = [(m, r) for m, r in rows if (r["id"], r["completion"]) == pair]
    assert all(any("verdict from cache" in n for n in r["notes"]) for _, r in same)


def test_a_model_with_the_weights_of_one_beside_it_reuses_its_record(run_dir, monkeypatch):
    """An RL run that kept nothing saves SFT's weights again: evaluated together, it is neither generated
    nor verified again; its record is SFT's, relabelled."""
    from tritonrl_lib.model import load as models

    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "ev", "eval_tasks": "builtin",
                                          "num_tasks": 1, "eval_k": 1})
    paths = cfg.paths.ensure()
    model, tok = models.load_policy(cfg)
    models.save_checkpoint(model, tok, paths.checkpoint("sft"), base_model="tiny", extra={"stage": "sft"})
    models.save_checkpoint(model, tok, paths.checkpoint("rl"), base_model="tiny",
                           extra={"stage": "rl", "method": "best_of_n", "round": 0})
    del model
    generated: list[str] = []

    def fake_sample(cfg_, spec, tasks_, sampling, **kw):
        generated.append(Path(spec).name)
        return _made([[format_completion(t.reference_solution or "no code")] for t in tasks_]), {"wall_s": 1.0}

    monkeypatch.setattr(E, "sample_model", fake_sample)
    res = E.evaluate_run(cfg, paths, ["sft", "rl"], progress=False, log=quiet)
    assert generated == ["sft"]
    sft, rl = res.evals
    assert (sft.status, rl.status) == ("evaluated", "reused") and rl.record["reused_from"] == "sft"
    assert [r["model_stage"] for r in rl.record["detailed_results"]] == ["rl"] * len(sft.record["detailed_results"])
    assert [r["reason"] for r in rl.record["detailed_results"]] == [r["reason"] for r in sft.record["detailed_results"]]
    assert paths.eval_file("rl").is_file()
