"""benchmarks/verify_kept.py: a cut evaluation's kept completions verified on a machine without the weights.

The kept folders are made as the evaluation makes them (named after the real fingerprint, completions
written by eval/resume.py). Every stage's folder must receive each verdict under the evaluation's own keys:
the evaluation, resumed afterwards, must find every verdict there and run no job. The completions of all
stages are verified in one pass, task by task, duplicates once; a second call verifies nothing again;
folders made with other verifier settings are refused, not verified under the wrong rules.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.heldout import load_eval_tasks
from tritonrl_lib.eval.record import fingerprint
from tritonrl_lib.eval.resume import partial_path, resume_dir, write_partial
from tritonrl_lib.eval.run import ModelToEval, eval_sampling, evaluate_models
from tritonrl_lib.verify.pool import VerifierPool

ROOT = Path(__file__).resolve().parent.parent
PARAMS = ["eval_tasks=builtin", "workers=1"]


def _script():
    spec = importlib.util.spec_from_file_location("verify_kept", ROOT / "benchmarks" / "verify_kept.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kept(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / "verdicts").rglob("*.json"))}


def _cfg(root: Path, **more):
    return load_config("cpu", overrides={"outputs_dir": str(root / "runs"), "run": "base", "eval_tasks": "builtin",
                                         "workers": 1, **more})


def _keep(out: Path, stage: str, spec: str, tasks, cfg, answers, sampling=None) -> Path:
    """A kept evaluation as eval/resume.py writes it: its folder, named after the fingerprint."""
    sampling = sampling or eval_sampling(cfg, len(answers[0]))
    fp = fingerprint(model_stage=stage, spec=spec, tasks=tasks, sampling=sampling, cfg=cfg, device="cpu")
    folder = resume_dir(out, fp)
    write_partial(partial_path(folder), fp, answers, {})
    return folder


def test_kept_completions_are_verified_once_where_the_evaluation_finds_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cfg = _cfg(tmp_path)
    tasks = load_eval_tasks(cfg, cfg.paths)
    solved = 0
    right = f"```python\n{tasks[solved].reference_solution}\n```"
    wrong = right.replace("tl.minimum(tl.maximum(x, min_val), max_val)", "tl.maximum(x, min_val)")
    assert wrong != right  # the planted error must be there, or the test proves nothing
    right2 = right.replace("```python\n", "```python\n# the same kernel, another text\n")
    # the other task's answers have no code: the static check rejects them before any job
    answers = {"sft": [[right, wrong] if i == solved else ["no code a", "no code b"] for i in range(len(tasks))],
               "rl_grpo": [[right2, wrong] if i == solved else ["no code c", "no code a"] for i in range(len(tasks))]}
    assert len(tasks) == 2 and solved == 0
    sampling = eval_sampling(cfg, 2)
    eval_dir = tmp_path / "eval"
    models, folders = [], []
    for stage, cs in answers.items():
        model = ModelToEval(stage, f"model-of-{stage}", None, eval_dir / f"eval_{stage}.json")
        models.append(model)
        folders.append(_keep(model.out, stage, model.spec, tasks, cfg, cs, sampling))
    args = [str(tmp_path), "--profile", "cpu", "-p", "eval_k=2", *sum((["-p", p] for p in PARAMS), [])]

    order = []
    real_map = VerifierPool.map
    monkeypatch.setattr(VerifierPool, "map", lambda self, ts, texts, **kw: order.append(list(texts))
                        or real_map(self, ts, texts, **kw))
    assert _script().main(args) == 0
    # one pass, task by task (a task's answers of both stages together), each distinct answer once
    assert order == [[right, wrong, right2, "no code a", "no code b", "no code c"]]
    first = [_kept(f) for f in folders]
    assert first[0] == first[1]  # each verdict stored in both stages' folders
    assert sorted(v["correct"] for v in first[0].values()) == [False, True, True]  # the three with code
    assert "0 had a verdict from an earlier call" in capsys.readouterr().out

    assert _script().main(args) == 0  # a second call: every answer found, nothing verified again
    assert "4 had a verdict from an earlier call" in capsys.readouterr().out
    assert [_kept(f) for f in folders] == first

    # the evaluation itself, resumed (its weights at hand again), finds every verdict: no job runs
    monkeypatch.setattr(VerifierPool, "_run", lambda self, jobs: iter(()) if not jobs else pytest.fail(
        f"the resumed evaluation ran {len(jobs)} job(s) verify_kept had verified"))
    evals = evaluate_models(cfg, models, tasks, k=2, progress=False, log=lambda _m: None)
    rates = {e.model_stage: e.record["metrics"]["correct_rate"] for e in evals}
    assert rates["sft"] == rates["rl_grpo"] > 0


def test_folders_made_with_other_verifier_settings_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cfg = _cfg(tmp_path)
    tasks = load_eval_tasks(cfg, cfg.paths)
    sampling = eval_sampling(cfg, 1)
    out = tmp_path / "eval" / "eval_sft.json"
    fp = fingerprint(model_stage="sft", spec="m", tasks=tasks, sampling=sampling, cfg=cfg, device="cpu")
    write_partial(partial_path(resume_dir(out, fp)), fp, [["no code"] for _ in tasks], {})
    args = [str(tmp_path), "--profile", "cpu", "-p", "eval_k=1", *sum((["-p", p] for p in PARAMS), [])]
    with pytest.raises(SystemExit, match="nothing to verify"):
        _script().main([*args, "-p", "atol=0.5"])  # a looser tolerance than the kept evaluation's
    assert "made with other settings: verify" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no kept evaluation"):
        _script().main([str(tmp_path / "elsewhere"), "--profile", "cpu"])


def test_first_verifies_the_chosen_tasks_before_the_rest(tmp_path, monkeypatch):
    """`--first kernelbench/L2/`: a short machine spends itself where no verdict is yet, the rest after."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cfg = _cfg(tmp_path)
    tasks = load_eval_tasks(cfg, cfg.paths)
    right = f"```python\n{tasks[0].reference_solution}\n```"
    answers = [[right, "no code a"], ["no code b", "no code c"]]
    _keep(tmp_path / "eval" / "eval_sft.json", "sft", "m", tasks, cfg, answers)
    order = []
    real_map = VerifierPool.map
    monkeypatch.setattr(VerifierPool, "map", lambda self, ts, texts, **kw: order.append(list(texts))
                        or real_map(self, ts, texts, **kw))
    args = [str(tmp_path), "--profile", "cpu", "-p", "eval_k=2", *sum((["-p", p] for p in PARAMS), [])]
    assert _script().main([*args, "--first", tasks[1].id]) == 0
    assert order == [["no code b", "no code c", right, "no code a"]]  # the chosen task first, then the session's order
