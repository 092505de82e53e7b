"""benchmarks/eval_from_verdicts.py: a cut-off evaluation scored from the verdicts it kept.

Verdicts are stored the way the pool stores them (VerdictCache under the pool's key for a GPU pool's
description); the stand-in pool must find each by that key, rebuild static rejections, count samples
never verified as wrong, and find the pool's description by search when it is not given.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.verify.cache import VerdictCache
from tritonrl_lib.verify.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
WHERE = "cuda:NVIDIA H200; host 504 GiB split over 16 GPUs or pools, 12 workers sharing"


def _script():
    spec = importlib.util.spec_from_file_location("eval_from_verdicts", ROOT / "benchmarks" / "eval_from_verdicts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_kept_verdicts_are_found_static_failures_rebuilt_and_the_rest_counted_unverified(tmp_path):
    mod = _script()
    cfg = load_config("cpu")
    tasks = {t.name: t for t in load_tasks("builtin") if t.name in ("relu", "abs")}
    relu, abs_ = tasks["relu"], tasks["abs"]
    cache = VerdictCache(tmp_path / "verdicts")
    kept = mod.KeptVerdicts(cfg, cache, WHERE)
    good = _fenced(relu.reference_solution)
    _, job = mod.VerifierPool._prepare(kept.pool, relu, good, cfg.verify, True)
    cache.put(kept.key(relu, job), Verdict(task_id=relu.id, stage="timing", correct=True, reason="ok", reward=1.0))

    torch_only = _fenced("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                         "    def forward(self, x):\n        return torch.relu(x)\n")
    never_verified = _fenced(abs_.reference_solution)
    out = kept.map([relu, relu, abs_], [good, torch_only, never_verified])

    assert out[0].correct and out[0].reason == "ok"  # the kept verdict, by its key
    assert not out[1].correct and out[1].reason.startswith("static")  # rebuilt: no Triton kernel
    assert not out[2].correct and out[2].reason == "timeout" and "not verified" in out[2].error
    assert out[1].stage in ("extract", "none") and out[2].stage == "static"  # unverified, yet it passed the static check
    assert dict(kept.unverified) == {abs_.id: 1}

    kept.where = ""
    probes = [(relu, job)]
    assert mod.find_where(kept, probes) == WHERE  # the pool's description, found among those a pool writes
    kept.where = "cuda:NVIDIA H200; host 504 GiB, 3 workers sharing"
    assert kept.map([relu], [good])[0].reason == "timeout"  # another pool's key finds nothing

    # an evaluation resumed under another pool (three pools on the host, then two) kept verdicts under both
    other = "cuda:NVIDIA H200; host 504 GiB split over 6 GPUs or pools, 16 workers sharing"
    _, job_abs = mod.VerifierPool._prepare(kept.pool, abs_, never_verified, cfg.verify, True)
    cache.put(kept.key(abs_, job_abs, other), Verdict(task_id=abs_.id, stage="timing", correct=True, reason="ok"))
    kept.where = ""
    kept.wheres = mod.find_wheres(kept, [(relu, job), (abs_, job_abs)])
    assert sorted(kept.wheres) == sorted([WHERE, other])
    assert [v.reason for v in kept.map([relu, abs_], [good, never_verified])] == ["ok", "ok"]


def _shrunk_script():
    spec = importlib.util.spec_from_file_location("eval_shrunk_on_cpu", ROOT / "benchmarks" / "eval_shrunk_on_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _keep(eval_dir: Path, name: str, digest: str, n: int) -> Path:
    folder = eval_dir / f".eval_sft.resume-{name}"
    folder.mkdir(parents=True)
    answers = [[{"prompt_index": i, "sample_index": 0, "text": "x"}] for i in range(n)]
    (folder / "completions.json").write_text(json.dumps({"fingerprint": {"tasks": digest}, "completions": answers}))
    return folder


def test_answers_kept_for_another_task_list_are_refused(tmp_path, capsys, monkeypatch):
    """Kept answers are matched to tasks by position: answers kept for another profile's held-out list
    would be judged against the wrong problems. Only the folder made for this list is taken, whatever
    the folders' names (ordered by digest, so arbitrary); none, and both scripts stop saying why."""
    from tritonrl_lib.eval.heldout import load_eval_tasks
    from tritonrl_lib.eval.record import tasks_digest
    from tritonrl_lib.eval.resume import kept_for_tasks

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the shrunk script sets it for its process: not for later tests
    cfg = load_config("cpu", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "base", "eval_tasks": "builtin"})
    tasks = load_eval_tasks(cfg, cfg.paths)
    eval_dir = tmp_path / "eval"
    other = _keep(eval_dir, "ffff", "0" * 16, len(tasks))  # sorts last
    with pytest.raises(ValueError, match="no kept generation .* found: .eval_sft.resume-ffff"):
        kept_for_tasks(eval_dir, "sft", tasks)
    for argv, script in (([], _script()), (["--level", "1"], _shrunk_script())):
        with pytest.raises(SystemExit) as stop:
            script.main([str(tmp_path), "--stage", "sft", "--profile", "cpu", "-p", "eval_tasks=builtin", *argv])
        assert "Pass the session's --profile" in capsys.readouterr().err + str(stop.value.code)
    mine = _keep(eval_dir, "0000", tasks_digest(tasks), len(tasks))
    assert kept_for_tasks(eval_dir, "sft", tasks)[0] == mine != other
    swapped = tasks[1:] + tasks[:1]  # the same tasks in another order: another list
    with pytest.raises(ValueError, match="no kept generation"):
        kept_for_tasks(eval_dir, "sft", swapped)


def test_kept_completions_keep_their_finish_reasons_in_the_record():
    """A cut pass scored from its kept completions reports loops stopped as the full evaluation does:
    the completions go in as rollout Completions (finish_reason kept), not as bare text."""
    from tritonrl_lib.eval.record import build_record
    from tritonrl_lib.eval.resume import completions_of
    from tritonrl_lib.eval.run import eval_sampling

    cfg = load_config("cpu")
    relu = next(t for t in load_tasks("builtin") if t.name == "relu")
    kept = [[{"prompt_index": 0, "sample_index": j, "text": "x", "num_tokens": 9, "prompt_tokens": 5,
              "finish_reason": reason, "seconds": 0.1} for j, reason in enumerate(("loop", "eos"))]]
    comps = completions_of(kept)
    assert [c.finish_reason for c in comps[0]] == ["loop", "eos"]
    verdicts = [Verdict(task_id=relu.id, stage="extract", reason="static:no_modelnew")] * 2
    record = build_record(model_stage="sft", model_path="kept", tasks=[relu], completions=comps, verdicts=verdicts,
                          sampling=eval_sampling(cfg, None), task_source="heldout")
    assert [r["finish_reason"] for r in record["detailed_results"]] == ["loop", "eos"]
    assert record["metrics"]["num_loop"] == 1


def test_main_scores_a_cut_pass_per_sample_with_finish_reasons(tmp_path, monkeypatch, capsys):
    """The script end to end on a kept folder made as the evaluation makes it: samples never judged are
    counted per sample in record["unverified"] (the same answer twice is two samples), count as wrong but
    valid (they passed the static check), and every row keeps its finish_reason."""
    from tritonrl_lib.eval.heldout import load_eval_tasks
    from tritonrl_lib.eval.record import fingerprint
    from tritonrl_lib.eval.resume import partial_path, resume_dir, write_partial
    from tritonrl_lib.eval.run import eval_sampling
    from tritonrl_lib.rollout.results import Completion

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cfg = load_config("cpu", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "base", "eval_tasks": "builtin"})
    tasks = load_eval_tasks(cfg, cfg.paths)
    code = f"```python\n{tasks[0].reference_solution}\n```"

    def comp(i, j, text, reason):
        return Completion(prompt_index=i, sample_index=j, text=text, token_ids=[], num_tokens=3, prompt_tokens=2,
                          finish_reason=reason, seconds=0.1)

    answers = [[comp(0, 0, code, "eos"), comp(0, 1, code, "eos")]] + [
        [comp(i, 0, "no code", "loop"), comp(i, 1, "no code either", "length")] for i in range(1, len(tasks))]
    sampling = eval_sampling(cfg, 2)
    fp = fingerprint(model_stage="sft", spec="model-of-sft", tasks=tasks, sampling=sampling, cfg=cfg, device="cpu")
    folder = resume_dir(tmp_path / "eval" / "eval_sft.json", fp)
    write_partial(partial_path(folder), fp, answers, {})
    assert _script().main([str(tmp_path), "--stage", "sft", "--profile", "cpu", "-p", "eval_tasks=builtin",
                           "-p", "eval_k=2", "--where", WHERE]) == 0
    record = json.loads((tmp_path / "eval" / "eval_sft.partial.json").read_text())
    assert record["unverified"] == {tasks[0].id: 2}  # two samples, one distinct answer
    assert "2 samples (1 distinct answers) not verified" in capsys.readouterr().out
    rows = record["detailed_results"]
    assert [r["finish_reason"] for r in rows] == [c.finish_reason for cs in answers for c in cs]
    first = [r for r in rows if r["id"] == tasks[0].id]
    assert all(r["stage"] == "static" and not r["correct"] for r in first)  # valid, not judged, counted wrong
    others = len(rows) - len(first)
    assert record["metrics"]["num_valid"] == 2 and record["metrics"]["num_loop"] == others // 2


def test_baselines_measured_on_the_gpu_are_attached_here(tmp_path, monkeypatch, capsys):
    """`--baselines FILE`: the times `tritonrl baselines` measured on the verdicts' machine reach the record
    scored on this one (its own machine's file would never match), named with the machine they are of; a
    task never solved needs none, so the torch.compile block counts every sample of this pass."""
    from tritonrl_lib.eval import baselines as B
    from tritonrl_lib.eval.heldout import load_eval_tasks
    from tritonrl_lib.eval.record import fingerprint
    from tritonrl_lib.eval.resume import partial_path, resume_dir, write_partial
    from tritonrl_lib.eval.run import eval_sampling
    from tritonrl_lib.rollout.results import Completion

    cfg = load_config("cpu", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "base", "eval_tasks": "builtin"})
    tasks = load_eval_tasks(cfg, cfg.paths)
    answers = [[Completion(prompt_index=i, sample_index=0, text="no code", token_ids=[], num_tokens=3,
                           prompt_tokens=2, finish_reason="eos", seconds=0.1)] for i in range(len(tasks))]
    sampling = eval_sampling(cfg, 1)
    fp = fingerprint(model_stage="sft", spec="model-of-sft", tasks=tasks, sampling=sampling, cfg=cfg, device="cpu")
    write_partial(partial_path(resume_dir(tmp_path / "eval" / "eval_sft.json", fp)), fp, answers, {})
    h200 = {"device": "cuda", "name": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "triton": "3.6.0"}
    store = B.BaselineFile(tmp_path / "h200.json", h200)
    store.record(tasks[0], {"eager": {"ms": 2.0}, "compile": {"ms": 1.0}}, {"warmup": 3, "trials": 10, "trim": 0.1}, 9.0)
    store.save()
    argv = [str(tmp_path), "--stage", "sft", "--profile", "cpu", "-p", "eval_tasks=builtin", "-p", "eval_k=1",
            "--where", WHERE]
    assert _script().main([*argv, "--baselines", str(store.path)]) == 0
    assert "NVIDIA H200" in capsys.readouterr().out
    record = json.loads((tmp_path / "eval" / "eval_sft.partial.json").read_text())
    assert record["baselines"]["file"] == str(store.path) and record["baselines"]["machine"]["name"] == "NVIDIA H200"
    assert [r["baseline_compile_ms"] for r in record["detailed_results"]][:2] == [1.0, None]
    vc = record["metrics"]["vs_compile"]
    assert vc["num_samples"] == len(tasks) and vc["fast_p"]["1.0"] == 0.0  # nothing solved: every sample counts

    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="is not a baselines file"):
        _script().main([*argv, "--baselines", str(tmp_path / "bad.json")])
    h100 = B.BaselineFile(tmp_path / "h100.json", {**h200, "name": "NVIDIA H100 80GB HBM3"})
    h100.save()
    with pytest.raises(SystemExit, match="while these verdicts came from NVIDIA H200: speedups would mix machines"):
        _script().main([*argv, "--baselines", str(h100.path)])
