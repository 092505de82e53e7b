"""`tritonrl eval`: one model, a run's stages side by side, and the errors a user meets first."""

from __future__ import annotations

import json

import pytest

from tritonrl_lib.cli import main
from tritonrl_lib.eval.command import looks_like_folder, slug

pytestmark = pytest.mark.timeout(600)


def args(run_dir, *extra: str) -> list[str]:
    return ["eval", "--params", "smoke", "-p", f"outputs_dir={run_dir}", "--run", "cli", "--quiet", *extra]


def test_nothing_to_evaluate_is_an_error(run_dir, capsys):
    assert main(args(run_dir)) == 2
    assert "--model PATH" in capsys.readouterr().err


def test_missing_stage_checkpoint_names_the_notebook(run_dir, capsys):
    assert main(args(run_dir, "--model", "rl", "--tasks", "builtin")) == 2
    err = capsys.readouterr().err
    assert "no finished rl checkpoint" in err and "03_rl" in err


def test_heldout_without_data_stage_names_01_data(run_dir, capsys):
    assert main(args(run_dir, "--model", "tiny", "--tasks", "heldout")) == 2
    assert "01_data" in capsys.readouterr().err


def test_bad_model_path_and_bad_task_source(run_dir, capsys):
    assert main(args(run_dir, "--model", "./no/such/model", "--tasks", "builtin")) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(args(run_dir, "--model", "tiny", "--tasks", "nowhere.txt")) == 2
    assert "unknown task source" in capsys.readouterr().err
    assert main(args(run_dir, "--model", "tiny", "-p", "eval_kk=2")) == 2
    assert "eval_k" in capsys.readouterr().err  # the closest setting is named


def test_a_folder_path_without_dot_slash_is_checked_at_once(run_dir, capsys, monkeypatch, tmp_path):
    """`--model outputs/nosuch/checkpoints/sft` must not start generating and fail later."""
    (tmp_path / "cwd" / "outputs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd")
    for spec in ("outputs/nosuch/checkpoints/sft", "outputs/nosuch", "a/b/c"):
        assert main(args(run_dir, "--model", spec, "--tasks", "builtin")) == 2
        assert "no such folder" in capsys.readouterr().err
    assert not looks_like_folder("Qwen/Qwen2.5-Coder-7B-Instruct") and not looks_like_folder("tiny")


def test_compare_on_a_run_that_does_not_exist_leaves_no_folder(run_dir, capsys):
    assert main(["eval", "--params", "smoke", "-p", f"outputs_dir={run_dir}", "--run", "nosuchrun", "--compare",
                 "--quiet"]) == 2
    assert "01_data" in capsys.readouterr().err  # held-out tasks need the run's split
    assert not (run_dir / "nosuchrun").exists()


def test_slug_is_a_file_name():
    assert slug("Qwen/Qwen2.5-Coder-7B-Instruct") == "Qwen_Qwen2.5-Coder-7B-Instruct"
    assert slug("tiny") == "tiny"


@pytest.mark.slow
def test_evaluate_a_model_then_compare_the_run(run_dir, tmp_path, capsys):
    out = tmp_path / "tiny.json"
    assert main(args(run_dir, "--model", "tiny", "--tasks", "builtin", "--num_tasks", "2", "--k", "1",
                     "--out", str(out), "--json")) == 0
    printed = json.loads(capsys.readouterr().out)
    rec = json.loads(out.read_text())
    assert printed["model_tiny"]["metrics"] == rec["metrics"]
    assert rec["model_path"] == "tiny" and rec["num_tasks"] == 2 and rec["k"] == 1
    assert len(rec["detailed_results"]) == 2

    # --compare: base is evaluated; sft and rl have no checkpoints and are skipped with the reason
    assert main(args(run_dir, "--compare", "--tasks", "builtin", "--num_tasks", "2", "--k", "1")) == 0
    captured = capsys.readouterr()
    table = captured.out.splitlines()
    assert table[0].split()[:3] == ["stage", "level", "tasks"]
    assert [line.split()[0] for line in table[1:4]] == ["base", "base", "base"]
    assert "skipped sft" in captured.err and "02_sft" in captured.err and "skipped rl" in captured.err
    assert (run_dir / "cli" / "eval" / "eval_base.json").is_file()
