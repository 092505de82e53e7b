"""What the report tells a reader: what the run was, the models' own replies and verdicts, what is out
of date, and no words from inside the project."""

from __future__ import annotations

import html
import json
import re

import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.record import EvalSampling, build_record, write_record
from tritonrl_lib.eval.identity import model_identity
from tritonrl_lib.model.load import MARKER
from tritonrl_lib.report.build import build_report, parse_table
from tritonrl_lib.report.text import explain_reason, pick_examples, verdict_sentence
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.reward import compute_reward
from tritonrl_lib.verify.verdict import Verdict

TASKS = [Task(id=f"builtin/L{lvl}/op{i}", level=lvl, name=f"op{i}", source=f"# {i}") for lvl, i in ((1, 0), (2, 1))]


def verdict(stage: str, reason: str, correct: bool = False) -> Verdict:
    return Verdict(stage=stage, correct=correct, reason="ok" if correct else reason,
                   reward=compute_reward(stage, (), None))


def evaluate(paths, model_stage: str, replies: list[str], verdicts: list[Verdict], fingerprint_of=None) -> dict:
    """An eval record as 04_eval writes it: one reply per task here (k=1)."""
    rec = build_record(model_stage=model_stage, model_path=model_stage, tasks=TASKS, completions=[[r] for r in replies],
                       verdicts=verdicts, sampling=EvalSampling(1, 0.0, 1.0, 64, 8, 0), task_source="heldout",
                       device="cpu (2 cores)")
    if fingerprint_of is not None:
        rec["fingerprint"] = {"model": model_identity(str(fingerprint_of))}
    write_record(paths.eval_file(model_stage), rec)
    return rec


def adapter(folder, content: str = "{}") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(content)
    (folder / MARKER).write_text(json.dumps({"base_model": "tiny"}))


@pytest.fixture
def cfg(run_dir):
    return load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": "demo"})


def test_a_demonstration_run_says_so_first_and_points_to_real_results(cfg):
    paths = cfg.paths.ensure()
    evaluate(paths, "base", ["no code here", "```python\nclass Model: pass\n```"],
             [verdict("none", "no_code"), verdict("extract", "static:no_modelnew")])
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    assert report.demonstration
    first = report.description[0]
    assert first.startswith("A demonstration, not a measurement") and "`cpu` profile" in first
    assert "one sample moves a rate by 50 points" in first  # 2 samples per model
    assert "`gpu` profile" in report.description[-1] and "docs/RESULTS.md" in report.description[-1]
    g = load_config("gpu")  # the pointer to a real run is read from the gpu profile, not written beside it
    assert f"on {g.data.n_sft_examples:,} verified examples for {g.sft.epochs:g} epochs" in report.description[-1]
    assert f"runs {g.rl.rounds} rounds of best-of-N" in report.description[-1]
    # the demonstration box comes before any number
    assert page.index("A demonstration, not a measurement") < page.index("<h2>Headline</h2>")
    assert re.search(r"<a href='[^']*docs/RESULTS\.md'>docs/RESULTS\.md</a>", page)


def test_a_full_sized_run_is_described_without_the_demonstration_box(run_dir):
    cfg = load_config("gpu", overrides={"outputs_dir": str(run_dir), "run": "big", "device": "cpu"})
    paths = cfg.paths.ensure()
    tasks = [Task(id=f"builtin/L1/op{i}", level=1, name=f"op{i}", source="#") for i in range(20)]
    rec = build_record(model_stage="base", model_path="m", tasks=tasks, completions=[["x"] * 4 for _ in tasks],
                       verdicts=[verdict("none", "no_code")] * 80, sampling=EvalSampling(4, 0.2, 0.95, 64, 8, 0),
                       task_source="heldout")
    write_record(paths.eval_file("base"), rec)
    report = build_report(cfg, paths)
    assert not report.demonstration and "demonstration" not in report.html_path.read_text().lower()


def test_the_models_own_replies_are_shown_with_their_verdicts(cfg):
    paths = cfg.paths.ensure()
    evaluate(paths, "base", ["I cannot help with that.", "Sure! Here is some text."],
             [verdict("none", "no_code"), verdict("none", "no_code")])
    evaluate(paths, "sft", ["```python\nclass ModelNew(nn.Module):\n    pass\n```", "```python\nimport torch\n```"],
             [verdict("extract", "static:no_triton_kernel"), verdict("extract", "static:no_modelnew")])
    page = html.unescape(build_report(cfg, paths).html_path.read_text()).replace("<code>", "`").replace("</code>", "`")
    assert "What the models wrote" in page
    for title in ("base, best sample", "base, typical sample", "sft, best sample", "sft, typical sample"):
        assert title in page
    assert "class ModelNew(nn.Module):" in page and "I cannot help with that." in page
    assert "Failed: the reply holds no Python code block [no_code]" in page
    assert "no `@triton.jit` kernel in the code [static:no_triton_kernel]" in page
    assert "How far it got: code found, but it failed the static check" in page


def test_examples_pick_the_best_and_a_typical_failure():
    rows = [{"id": "a", "correct": False, "reward": 0.0, "stage": "none", "reason": "no_code", "completion": "x"},
            {"id": "b", "correct": True, "reward": 0.7, "stage": "full", "reason": "ok", "completion": "y"},
            {"id": "c", "correct": False, "reward": 0.1, "stage": "compile", "reason": "mismatch:seed", "completion": "z"},
            {"id": "d", "correct": False, "reward": 0.0, "stage": "none", "reason": "no_code", "completion": "w"}]
    ex = pick_examples({"sft": {"detailed_results": rows}})
    assert [(e.kind, e.row["id"]) for e in ex] == [("best", "b"), ("typical", "d")]
    assert verdict_sentence(rows[1]).startswith("Correct (not timed: no GPU)")
    assert explain_reason("mismatch:scaled") == "the output differs from PyTorch's (scaled)"
    assert explain_reason("brand_new") == "the verifier's code 'brand_new'"


def test_an_evaluation_of_a_model_trained_again_since_is_left_out(cfg):
    """The report never describes a checkpoint that no longer exists."""
    paths = cfg.paths.ensure()
    sft = paths.checkpoint("sft")
    adapter(sft, '{"r": 16}')
    evaluate(paths, "base", ["a", "b"], [verdict("none", "no_code")] * 2, fingerprint_of="embedded")
    evaluate(paths, "sft", ["OLD-SFT-REPLY", "c"], [verdict("none", "no_code")] * 2, fingerprint_of=sft)
    report = build_report(cfg, paths)
    assert not report.stale and {r["model"] for r in parse_table(report.html_path.read_text(), "metrics")} == \
        {"base", "sft"}

    adapter(sft, '{"r": 8}')  # 02_sft ran again: another adapter in the same folder
    report = build_report(cfg, paths)
    page = report.html_path.read_text()
    assert any(s.startswith("sft: its evaluation is left out") and "02_sft" in s for s in report.stale)
    assert "Out of date, and left out of this report" in page
    assert {r["model"] for r in parse_table(page, "metrics")} == {"base"}
    assert "OLD-SFT-REPLY" not in page and not any(line.startswith("sft:") for line in report.headline)

    (sft / MARKER).unlink()  # a save that did not finish: that model is gone
    assert any("is not a finished save" in s for s in build_report(cfg, paths).stale)


def test_a_damaged_log_is_named_and_the_rest_still_reported(cfg):
    paths = cfg.paths.ensure()
    paths.sft_log.parent.mkdir(parents=True, exist_ok=True)
    paths.sft_log.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "lo\n{"step": 3, "loss": 0.5}\n')
    evaluate(paths, "base", ["a", "b"], [verdict("none", "no_code")] * 2)
    report = build_report(cfg, paths)
    assert any(f"{paths.sft_log}:2" in m and "delete it" in m for m in report.missing)
    assert parse_table(report.html_path.read_text(), "metrics")


def test_the_page_has_no_words_from_inside_the_project(cfg):
    paths = cfg.paths.ensure()
    evaluate(paths, "base", ["a", "b"], [verdict("none", "no_code")] * 2)
    text = re.sub(r"<[^>]+>", " ", build_report(cfg, paths).html_path.read_text()).lower()
    for word in ("issue", "brief", "source report", "runpaths", "tritonrl_lib", "beyond-tritonrl"):
        assert word not in text, word


def test_results_made_with_other_settings_or_outside_the_runner_are_said_so(cfg, run_dir):
    from tritonrl_lib.run import state as run_state

    paths = cfg.paths.ensure()
    evaluate(paths, "base", ["a", "b"], [verdict("none", "no_code")] * 2)
    made_with = load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": "demo", "num_tasks": 9})
    run_state.write_record(made_with, paths, "04_eval", "sha", {}, 1.0)  # as `tritonrl run` records 04
    report = build_report(cfg, paths)
    assert report.caveats == ["04_eval: made with other settings than this report's (as made -> as now: "
                              f"eval.num_tasks 9 -> {cfg.eval.num_tasks})"]
    assert "Made otherwise than this report" in report.html_path.read_text()

    run_state.write_record(cfg, paths, "04_eval", "sha", {}, 1.0)
    assert not build_report(cfg, paths).caveats
    evaluate(paths, "base", ["c", "d"], [verdict("none", "no_code")] * 2)  # 04 ran again by papermill
    (caveat,) = build_report(cfg, paths).caveats
    assert caveat.startswith("04_eval: ran again outside `tritonrl run`") and "eval changed" in caveat
