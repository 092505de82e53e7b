"""`verify()` and `tritonrl verify`: the two front doors of the verifier."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify import Verdict, verify
from tritonrl_lib.verify.command import main as verify_main
from tritonrl_lib.verify.pool import VerifierError, VerifierPool

CASES = Path(__file__).parent / "verifier_cases"
RELU = CASES / "tasks" / "relu.py"


def test_verify_never_runs_the_candidate_in_the_callers_process():
    code = (CASES / "candidates" / "relu_raises_forward.py").read_text().replace(
        'raise ValueError("this solution gives up")', 'raise ValueError(f"ran in pid {os.getpid()}")')
    code = "import os\n" + code
    v = verify(RELU.read_text(), code, VerifyConfig(timeout_s=30), static=False)
    assert isinstance(v, Verdict) and v.reason == "runtime_error"
    pid = int(re.search(r"ran in pid (\d+)", v.error).group(1))
    assert pid != os.getpid()
    # the default pool is shared: a second call reuses its worker
    assert verify(RELU.read_text(), (CASES / "candidates" / "relu_ok.py").read_text()).correct


def test_verdict_cache_serves_repeats(tmp_path):
    code = (CASES / "candidates" / "relu_ok.py").read_text()
    with VerifierPool(VerifyConfig(timeout_s=30), workers=1, cache=tmp_path, progress=False) as pool:
        first = pool.verify(RELU.read_text(), code)
        second = pool.verify(RELU.read_text(), code)
        other = pool.verify(RELU.read_text(), code, config=VerifyConfig(timeout_s=30, atol=1e-3))
    assert first.correct and second.correct and other.correct
    assert "verdict from cache" not in first.notes and "verdict from cache" in second.notes
    assert "verdict from cache" not in other.notes  # a different tolerance is a different verdict
    assert second.reward == first.reward and second.errors == first.errors
    assert len(list(tmp_path.rglob("*.json"))) == 2
    # workers sharing the host set a large task's budget (its sets resized or left out): another pool
    # size judges afresh, the same size reuses
    with VerifierPool(VerifyConfig(timeout_s=30), workers=2, cache=tmp_path, progress=False) as pool:
        assert "verdict from cache" not in pool.verify(RELU.read_text(), code).notes
    with VerifierPool(VerifyConfig(timeout_s=30), workers=1, cache=tmp_path, progress=False) as pool:
        assert "verdict from cache" in pool.verify(RELU.read_text(), code).notes


def test_cli_exit_codes_and_json(tmp_path, capsys):
    completion = tmp_path / "completion.txt"
    completion.write_text("Sure! Here is a ReLU in Triton.\n\n```python\n"
                          + (CASES / "candidates" / "relu_ok.py").read_text() + "```\nIt is fast.")
    assert verify_main([str(RELU), str(completion), "--json", "--device", "cpu", "-p", "timeout_s=30"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("stage", "correct", "reason", "reward", "cheat_flags", "errors", "speedup"):
        assert key in out
    assert out["correct"] is True and out["stage"] == "full" and out["reward"] == 0.7

    wrong = CASES / "candidates" / "relu_wrong_math.py"
    assert verify_main([str(RELU), str(wrong), "--device", "cpu"]) == 1
    text = capsys.readouterr().out
    assert text.startswith("FAIL") and "mismatch:tiny" in text


def test_cli_bad_input_exits_2_and_says_what_is_wrong(tmp_path, capsys):
    sol = CASES / "candidates" / "relu_ok.py"
    assert verify_main([str(tmp_path / "missing.py"), str(sol)]) == 2
    assert "task file" in capsys.readouterr().err
    assert verify_main([str(RELU), str(tmp_path / "missing.py")]) == 2
    assert "solution file" in capsys.readouterr().err
    bad = tmp_path / "bad_task.py"
    bad.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    assert verify_main([str(bad), str(sol)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "get_inputs" in err and "get_init_inputs" in err
    assert verify_main([str(RELU), str(sol), "-p", "no_such_setting=1"]) == 2
    assert "no_such_setting" in capsys.readouterr().err


def test_cli_is_registered_with_the_main_command(capsys):
    cli = pytest.importorskip("tritonrl_lib.cli")
    with pytest.raises(SystemExit) as e:
        cli.main(["verify", "--help"])
    assert e.value.code == 0
    assert "SOLUTION_FILE" in capsys.readouterr().out


def test_a_pool_whose_workers_cannot_start_says_so(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no torch here' >&2\nexit 3\n")
    broken.chmod(0o755)
    with VerifierPool(VerifyConfig(timeout_s=30), workers=1, cache=False, progress=False) as pool:
        pool.python = str(broken)
        with pytest.raises(VerifierError, match="cannot start"):
            pool.verify(RELU.read_text(), (CASES / "candidates" / "relu_ok.py").read_text())
