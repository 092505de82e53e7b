"""Evaluating real models and real completions: the tiny model through rollout and the verifier,
checkpoints per stage, resuming, fixed seeds, and known-good solutions scored by the real pool."""

from __future__ import annotations

import json
import shutil

import pytest

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.errors import EvalError
from tritonrl_lib.eval.run import evaluate_run, score_completions
from tritonrl_lib.eval.identity import MissingCheckpoint, model_of
from tritonrl_lib.eval.record import eval_sampling
from tritonrl_lib.eval.heldout import load_eval_tasks
from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.tasks import load_tasks

pytestmark = pytest.mark.timeout(600)


def smoke(run_dir, **overrides):
    return load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "ev", "eval_tasks": "builtin",
                                           "num_tasks": 2, "eval_k": 1, **overrides})


def quiet(_msg: str) -> None:
    pass


@pytest.mark.slow
def test_stages_are_evaluated_skipped_and_resumed(run_dir):
    cfg = smoke(run_dir)
    paths = cfg.paths.ensure()
    # an SFT adapter as 02_sft saves one (fresh LoRA on the tiny model)
    model, tok = models.load_policy(cfg)
    models.save_checkpoint(model, tok, paths.checkpoint("sft"), base_model="tiny", extra={"stage": "sft"})
    del model

    result = evaluate_run(cfg, paths, progress=False, log=quiet)
    status = {s.model_stage: s.status for s in result.evals}
    assert status == {"base": "evaluated", "sft": "evaluated", "rl": "skipped"}
    rl = next(s for s in result.evals if s.model_stage == "rl")
    assert "03_rl" in rl.note and not paths.eval_file("rl").exists()

    base = json.loads(paths.eval_file("base").read_text())
    sft = json.loads(paths.eval_file("sft").read_text())
    assert base["model_path"] == "tiny" and sft["model_path"] == str(paths.checkpoint("sft"))
    assert base["num_tasks"] == 2 and len(base["detailed_results"]) == 2
    assert {r["level"] for r in base["detailed_results"]} == {1, 2}  # the cap keeps both levels
    assert base["task_ids"] == sft["task_ids"]  # every stage sees the same tasks
    assert base["sampling"]["temperature"] == 0.0 and base["k"] == 1
    assert base["device"].startswith("cpu")
    for row in base["detailed_results"]:
        assert row["model_stage"] == "base" and row["stage"] in ("none", "extract", "static", "compile", "tiny", "full")
        assert isinstance(row["completion"], str) and row["num_tokens"] >= 1

    # the same command again: nothing is regenerated; nor after the adapter was moved away and back
    # (as a session restores it from a tarball: the same bytes, other mtimes)
    moved = run_dir / "elsewhere"
    shutil.move(str(paths.checkpoint("sft")), moved)
    shutil.copytree(moved, paths.checkpoint("sft"), copy_function=shutil.copyfile)
    again = evaluate_run(cfg, paths, progress=False, log=quiet)
    assert {s.model_stage: s.status for s in again.evals} == {"base": "reused", "sft": "reused", "rl": "skipped"}

    # greedy decoding with a fixed seed gives the same completions when forced to redo; the log says
    # which engine generated them and how fast
    said: list[str] = []
    forced = evaluate_run(cfg, paths, model_stages=["base"], force=True, progress=False, log=said.append)
    assert forced.evals[0].status == "evaluated"
    assert any(m.startswith("base: generating with the ") and "engine" in m for m in said), said
    assert any(m.startswith("base: generated in ") and "tokens/s" in m for m in said), said
    assert [r["completion"] for r in forced.evals[0].record["detailed_results"]] == \
        [r["completion"] for r in base["detailed_results"]]

    # other settings re-evaluate; k > 1 with greedy samples at a temperature, and the record says so
    cfg2 = smoke(run_dir, eval_k=2)
    res2 = evaluate_run(cfg2, paths, model_stages=["base"], progress=False, log=quiet)
    rec2 = res2.evals[0].record
    assert res2.evals[0].status == "evaluated" and rec2["k"] == 2 and len(rec2["detailed_results"]) == 4
    assert rec2["sampling"]["temperature"] == cfg2.rl.temperature
    assert any("identical samples" in n for n in rec2["notes"])
    assert rec2["metrics"]["pass_at_k"] is not None


def test_missing_checkpoint_names_the_stage_to_run(run_dir):
    cfg = smoke(run_dir)
    with pytest.raises(MissingCheckpoint, match="02_sft"):
        model_of(cfg, cfg.paths, "sft")
    # a folder whose save never finished (no marker) is not a checkpoint
    folder = cfg.paths.checkpoint("rl")
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    with pytest.raises(MissingCheckpoint, match="03_rl"):
        model_of(cfg, cfg.paths, "rl")
    assert model_of(cfg, cfg.paths, "base") == ("tiny", None)


def test_heldout_tasks_need_the_split_and_follow_it(run_dir):
    cfg = smoke(run_dir, eval_tasks="heldout", num_tasks=0)
    with pytest.raises(EvalError, match="01_data"):
        load_eval_tasks(cfg)
    cfg.paths.ensure()
    cfg.paths.split.write_text('{"seed": 0, "train_fam')  # a torn write
    with pytest.raises(EvalError, match="cannot be read.*01_data"):
        load_eval_tasks(cfg)
    from tritonrl_lib.data.split import make_split

    tasks = load_tasks("builtin")
    split = make_split(0, 0.25, tasks)
    cfg.paths.ensure()
    split.save(cfg.paths.split)
    held = load_eval_tasks(cfg)
    assert held and {t.id for t in held} == set(split.heldout_task_ids)
    assert not {t.op_family for t in held} & set(split.train_families)
    capped = load_eval_tasks(cfg, num_tasks=3)
    assert len(capped) == 3 and {t.id for t in capped} <= {t.id for t in held}
    assert {t.meta["heldout_set"] for t in held} == {"families"}  # this split holds no set (a)


def test_both_heldout_sets_capped_each_and_tagged(run_dir):
    from tritonrl_lib.data.split import make_split

    cfg = smoke(run_dir, eval_tasks="heldout", num_tasks=5)
    cfg.paths.ensure()
    split = make_split(0, 0.25, load_tasks("builtin"), in_family=1)
    split.save(cfg.paths.split)
    tasks = load_eval_tasks(cfg)
    by_set = {name: [t for t in tasks if t.meta["heldout_set"] == name] for name in ("tasks", "families")}
    assert len(by_set["tasks"]) == 5 and len(by_set["families"]) == 5
    assert {t.id for t in by_set["tasks"]} <= set(split.heldout_in_family_ids)
    assert {t.op_family for t in by_set["tasks"]} <= set(split.train_families)  # families RL trains on
    assert {t.id for t in by_set["families"]} <= set(split.heldout_task_ids)
    only_a = load_eval_tasks(smoke(run_dir, eval_tasks="heldout", num_tasks=0, heldout_sets=["tasks"]))
    assert {t.id for t in only_a} == set(split.heldout_in_family_ids)


def test_greedy_single_sample_stays_greedy(run_dir):
    s = eval_sampling(smoke(run_dir, eval_k=1, eval_temperature=0.0))
    assert (s.temperature, s.top_p, s.notes) == (0.0, 1.0, [])
    s = eval_sampling(smoke(run_dir, eval_k=3, eval_temperature=0.5))
    assert (s.temperature, s.notes) == (0.5, [])


@pytest.mark.slow
def test_known_good_solutions_score_correct_in_the_real_verifier(run_dir):
    cfg = smoke(run_dir)
    l1 = [t for t in load_tasks("builtin", levels=1) if t.reference_solution]
    tasks = [l1[0], next(t for t in l1 if t.op_family != l1[0].op_family)]  # two ops: one's kernel is wrong for the other
    good = format_completion(tasks[0].reference_solution, "Here is the kernel:")
    # the second task gets the first task's solution: it runs, but computes the wrong thing
    wrong = format_completion(tasks[0].reference_solution)
    # the third sample of the first task is the first one's code with other prose: verified once
    again = format_completion(tasks[0].reference_solution, "The same kernel again.")
    completions = [[good, "I cannot help with that.", again],
                   [wrong, format_completion(tasks[1].reference_solution), wrong]]
    rec = score_completions(cfg, tasks, completions, eval_sampling(cfg, k=3), model_stage="sft", model_path="fixture",
                            progress=False)
    rows = rec["detailed_results"]
    assert [r["correct"] for r in rows] == [True, False, True, False, True, False]
    assert rows[1]["reason"] == "no_code" and rows[1]["stage"] == "none"
    assert rows[0]["stage"] == "full" and rows[0]["reward"] == pytest.approx(0.7)  # no timing on a CPU
    assert rec["verify"] == {**rec["verify"], "candidates": 6, "unique": 4, "duplicates": 2}
    assert any("verified once" in n for n in rows[2]["notes"]) and not any("verified once" in n for n in rows[0]["notes"])
    assert rows[5]["reason"] == rows[3]["reason"]
    m = rec["metrics"]
    assert m["correct_rate"] == 50.0 and m["pass_at_k"] == 100.0
    assert m["fast1_rate"] is None  # correct but not timed: speed not measured
    # two tasks, one solved 2 of 3 times and one 1 of 3: resampling tasks gives 2/6 .. 4/6
    assert m["intervals"]["correct_rate"] == [33.33, 66.67]
    assert any("timing skipped" in n for n in rec["notes"])


@pytest.mark.slow
def test_an_evaluation_cut_off_mid_verification_resumes_per_sample(run_dir, monkeypatch):
    # a 10-minute device call can end between generating and verifying, or mid-verification: the
    # next call must neither generate again nor verify again what was already verified
    from tritonrl_lib.eval import resume as R
    from tritonrl_lib.eval import run as E
    from tritonrl_lib.rollout.results import Completion
    from tritonrl_lib.verify.cache import VerdictCache

    cfg = smoke(run_dir, eval_k=2)
    paths = cfg.paths.ensure()
    l1 = [t for t in load_tasks("builtin", levels=1) if t.reference_solution]
    tasks = [l1[0], next(t for t in l1 if t.op_family != l1[0].op_family)]
    texts = [[format_completion(tasks[0].reference_solution), "no code here"],
             [format_completion(tasks[0].reference_solution), format_completion(tasks[1].reference_solution)]]
    made = [[Completion(prompt_index=i, sample_index=j, text=t, token_ids=[7] * 5, num_tokens=5, prompt_tokens=40,
                        finish_reason="eos", seconds=0.5) for j, t in enumerate(ts)] for i, ts in enumerate(texts)]
    generated = []

    def fake_sample(cfg_, spec, tasks_, sampling, **kw):
        generated.append(spec)
        return made, {"wall_s": 1.0, "generated_tokens": 20}

    stored = []
    real_put = VerdictCache.put

    def put_then_cut_off(self, key, verdict):  # the call ends right after the first verdict is kept
        real_put(self, key, verdict)
        stored.append(key)
        raise KeyboardInterrupt

    out = paths.eval_file("sft")
    monkeypatch.setattr(E, "sample_model", fake_sample)
    monkeypatch.setattr(VerdictCache, "put", put_then_cut_off)
    with pytest.raises(KeyboardInterrupt):
        E.evaluate_model(cfg, "tiny", tasks, model_stage="sft", out=out, progress=False, log=quiet)
    (resume,) = out.parent.glob(".eval_sft.resume-*")
    assert generated == ["tiny"] and not out.exists() and R.partial_path(resume).is_file()
    assert len(stored) == 1 and len(list(R.verdicts_dir(resume).rglob("*.json"))) == 1

    monkeypatch.undo()
    monkeypatch.setattr(E, "sample_model", lambda *a, **kw: pytest.fail("generated again"))
    logged = []
    first = E.evaluate_model(cfg, "tiny", tasks, model_stage="sft", out=out, progress=False, log=logged.append)
    assert first.status == "evaluated" and any("earlier call" in m for m in logged)
    rows = first.record["detailed_results"]
    assert [r["correct"] for r in rows] == [True, False, False, True]
    assert [r["num_tokens"] for r in rows] == [5] * 4 and first.record["generation"]["generated_tokens"] == 20
    # the one verdict kept before the cut came back; the other two were verified now
    from_cache = [r for r in rows if any("verdict from cache" in n for n in r["notes"])]
    assert len(from_cache) == 1
    assert not list(out.parent.glob(".eval_sft.resume-*"))  # the record holds everything now

    # forced: from scratch (generated again, nothing from an earlier call), and resumable from there
    monkeypatch.setattr(E, "sample_model", fake_sample)
    forced = E.evaluate_model(cfg, "tiny", tasks, model_stage="sft", out=out, progress=False, log=quiet, force=True)
    assert generated == ["tiny", "tiny"]
    assert not any("verdict from cache" in n for r in forced.record["detailed_results"] for n in r["notes"])

    # a side file of other settings, or damaged, is not taken for this evaluation
    fp = first.record["fingerprint"]
    other = R.resume_dir(out, {**fp, "sampling": "other"})
    assert other != R.resume_dir(out, fp)
    R.write_partial(R.partial_path(other), {**fp, "sampling": "other"}, made, {})
    assert R.read_partial(R.partial_path(other), fp, tasks, 2) is None
    assert R.read_partial(R.partial_path(other), {**fp, "sampling": "other"}, tasks, 3) is None
    R.partial_path(other).write_text(json.dumps({"fingerprint": fp, "completions": 7}))
    assert R.read_partial(R.partial_path(other), fp, tasks, 2) is None
    R.clear_resume(out)
    assert not other.exists()


def test_a_forced_compare_reaches_the_evaluation(run_dir, monkeypatch):
    # `tritonrl eval --compare --force` must evaluate again, not reuse records or resume state
    from tritonrl_lib.cli import main
    from tritonrl_lib.eval import command as E  # the command's own name for evaluate_run

    seen = {}

    def fake_run(cfg, paths, **kw):
        seen.update(kw)
        raise EvalError("stopped here by the test")

    monkeypatch.setattr(E, "evaluate_run", fake_run)
    for extra, want in (([], False), (["--force"], True)):
        seen.clear()
        assert main(["eval", "--params", "smoke", "-p", f"outputs_dir={run_dir}", "--quiet", "--compare", *extra]) == 2
        assert seen["force"] is want


@pytest.mark.slow
def test_an_rl_adapter_identical_to_the_sft_one_reuses_its_record(run_dir, monkeypatch):
    # an RL run that kept nothing saves the SFT adapter again (another marker, the same weights):
    # its evaluation is the SFT one, relabelled, never generated again; other weights are evaluated
    from tritonrl_lib.eval import run as E
    from tritonrl_lib.rollout.results import Completion

    cfg = smoke(run_dir)
    paths = cfg.paths.ensure()
    model, tok = models.load_policy(cfg)
    models.save_checkpoint(model, tok, paths.checkpoint("sft"), base_model="tiny", extra={"stage": "sft"})
    models.save_checkpoint(model, tok, paths.checkpoint("rl"), base_model="tiny",
                           extra={"stage": "rl", "method": "best_of_n", "round": 0})
    tasks = [t for t in load_tasks("builtin", levels=1) if t.reference_solution][:1]
    made = [[Completion(prompt_index=0, sample_index=0, text=format_completion(tasks[0].reference_solution),
                        token_ids=[7] * 5, num_tokens=5, prompt_tokens=40, finish_reason="eos", seconds=0.5)]]
    generated = []

    def fake_sample(cfg_, spec, tasks_, sampling, **kw):
        generated.append(spec)
        return made, {"wall_s": 1.0, "generated_tokens": 5}

    monkeypatch.setattr(E, "sample_model", fake_sample)
    sft = E.evaluate_model(cfg, str(paths.checkpoint("sft")), tasks, model_stage="sft",
                           adapter=paths.checkpoint("sft"), out=paths.eval_file("sft"), progress=False, log=quiet)
    logged, attached = [], []
    real_attach = E.attach_to_record

    def spy_attach(rec, *args):  # baselines stored since the twin was made reach the reused record too
        attached.append(rec.get("stage"))
        return real_attach(rec, *args)

    monkeypatch.setattr(E, "attach_to_record", spy_attach)
    rl = E.evaluate_model(cfg, str(paths.checkpoint("rl")), tasks, model_stage="rl", adapter=paths.checkpoint("rl"),
                          out=paths.eval_file("rl"), progress=False, log=logged.append)
    assert len(generated) == 1 and rl.status == "reused" and "byte for byte" in logged[-1]
    assert attached == ["rl"]
    on_disk = json.loads(paths.eval_file("rl").read_text())
    assert on_disk["stage"] == "rl" and on_disk["reused_from"] == "sft"
    assert [r["model_stage"] for r in on_disk["detailed_results"]] == ["rl"]
    assert [r["correct"] for r in on_disk["detailed_results"]] == [r["correct"] for r in sft.record["detailed_results"]]
    assert on_disk["fingerprint"]["stage"] == "rl" and any("byte-identical" in n for n in on_disk["notes"])

    # one changed byte of the weights: another model, evaluated for real
    weights = next(paths.checkpoint("rl").glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    paths.eval_file("rl").unlink()
    again = E.evaluate_model(cfg, str(paths.checkpoint("rl")), tasks, model_stage="rl", adapter=paths.checkpoint("rl"),
                             out=paths.eval_file("rl"), progress=False, log=quiet)
    assert again.status == "evaluated" and len(generated) == 2


def test_the_evaluation_hands_its_records_to_the_solved_tasks_timing(run_dir, monkeypatch):
    """eval.baselines_measure=solved: once every stage is judged, evaluate_run passes its records to the
    timing of the solved tasks (eval/run.time_solved_tasks, tested with real timing in test_baselines.py);
    off, it is never called."""
    from tritonrl_lib.eval import run as R

    seen = []
    monkeypatch.setattr(R, "time_solved_tasks", lambda cfg, tasks, results, progress, log: seen.append(
        (cfg.eval.baselines_measure, [t.id for t in tasks], {r.model_stage: r.record is not None for r in results})))
    cfg = smoke(run_dir, baselines_measure="solved", eval_stages=["base"])
    result = evaluate_run(cfg, cfg.paths.ensure(), progress=False, log=quiet)
    assert seen == [("solved", json.loads(cfg.paths.eval_file("base").read_text())["task_ids"], {"base": True})]
    assert result.evals[0].status == "evaluated"
    seen.clear()
    evaluate_run(smoke(run_dir, eval_stages=["base"]), cfg.paths, progress=False, log=quiet)
    assert seen == []
