"""benchmarks/verify_kept.py: a cut evaluation's kept completions verified on a machine without the weights.

Every stage's verdict folder must receive each verdict (under the pool's keys, as the evaluation itself
stores them), the completions of all stages are verified in one pass with duplicates once, and a second
call finds what the first verified and verifies nothing again.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tritonrl_lib.core.config import load_config
from tritonrl_lib.eval.heldout import load_eval_tasks
from tritonrl_lib.eval.record import tasks_digest

ROOT = Path(__file__).resolve().parent.parent
PARAMS = ["eval_tasks=builtin", "workers=1"]


def _script():
    spec = importlib.util.spec_from_file_location("verify_kept", ROOT / "benchmarks" / "verify_kept.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _keep(eval_dir: Path, stage: str, digest: str, answers: list[list[str]]) -> Path:
    folder = eval_dir / f".eval_{stage}.resume-0000"
    folder.mkdir(parents=True)
    rows = [[{"prompt_index": i, "sample_index": j, "text": t} for j, t in enumerate(cs)] for i, cs in enumerate(answers)]
    (folder / "completions.json").write_text(json.dumps({"fingerprint": {"tasks": digest}, "completions": rows}))
    return folder


def _kept(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / "verdicts").rglob("*.json"))}


def test_kept_completions_are_verified_once_into_every_stage_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cfg = load_config("cpu", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "base", "eval_tasks": "builtin"})
    tasks = load_eval_tasks(cfg, cfg.paths)
    solved = 0
    right = f"```python\n{tasks[solved].reference_solution}\n```"
    wrong = right.replace("tl.minimum(tl.maximum(x, min_val), max_val)", "tl.maximum(x, min_val)")
    assert wrong != right  # the planted error must be there, or the test proves nothing
    # every other task's answers have no code: the static check rejects them before any job
    sft = [[right, wrong] if i == solved else ["no code"] for i in range(len(tasks))]
    rl = [[right] if i == solved else ["no code"] for i in range(len(tasks))]
    eval_dir = tmp_path / "eval"
    folders = [_keep(eval_dir, "sft", tasks_digest(tasks), sft), _keep(eval_dir, "rl_grpo", tasks_digest(tasks), rl)]
    args = [str(tmp_path), "--stages", "sft,rl_grpo", "--profile", "cpu", *sum((["-p", p] for p in PARAMS), [])]

    assert _script().main(args) == 0
    assert ", 0 of them verified by an earlier call" in capsys.readouterr().out
    first = [_kept(f) for f in folders]
    assert first[0] == first[1]  # each verdict stored in both stages' folders
    verdicts = list(first[0].values())
    assert len(verdicts) == 2  # the right answer twice (two stages) is verified once, the wrong one once
    assert sorted(v["correct"] for v in verdicts) == [False, True]

    assert _script().main(args) == 0  # every distinct answer found in the folders: nothing verified again
    assert ", 3 of them verified by an earlier call" in capsys.readouterr().out
    assert [_kept(f) for f in folders] == first
