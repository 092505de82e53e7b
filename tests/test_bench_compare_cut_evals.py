"""benchmarks/compare_cut_evals.py: two cut evaluations compared only where both judged every sample."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("compare_cut_evals", ROOT / "benchmarks" / "compare_cut_evals.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(spec: dict[str, list[object]], level: int = 1) -> list[dict]:
    """task -> per sample: True (right), False (wrong) or None (never verified)."""
    return [{"id": f"kernelbench/L{level}/{t}", "level": level, "sample": i, "heldout_set": "kernelbench",
             "correct": bool(v), "reason": "ok" if v else ("timeout" if v is None else "mismatch"),
             "error": "not verified: the evaluation was cut off before this sample" if v is None else ""}
            for t, samples in spec.items() for i, v in enumerate(samples)]


def test_only_problems_verified_in_both_are_compared(tmp_path, capsys):
    mod = _script()
    # A's pass reached "big" (all right) but B's did not: B's lower bound would make A look better there.
    a = _rows({"relu": [True, True], "tanh": [False, False], "big": [True, True]})
    b = _rows({"relu": [True, False], "tanh": [True, True], "big": [None, True]})
    (row,) = mod.compare(a, b, resamples=200)
    assert row["compared"] == 2 and row["problems"] == 3
    d = row["diff"]
    assert (d["a"], d["b"], d["difference"]) == (50.0, 75.0, -25.0)  # relu + tanh only
    assert row["only_a"] == [] and row["only_b"] == ["kernelbench/L1/tanh"]
    assert d["interval"][0] <= -25.0 <= d["interval"][1]

    for name, rows in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps({"detailed_results": rows}))
    assert mod.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "| L1 | 3 | 2 | 50.0 | 75.0 | -25.0 [" in out and "solved by B only: tanh" in out


def test_a_level_nothing_reached_in_both_says_so_and_bad_files_are_named(tmp_path, capsys):
    mod = _script()
    a = _rows({"x": [None]}, level=2) + _rows({"relu": [True]})
    b = _rows({"x": [False]}, level=2) + _rows({"relu": [False]})
    rows = {r["level"]: r for r in mod.compare(a, b, resamples=10)}
    assert rows[2]["compared"] == 0 and rows[2]["diff"] is None and rows[1]["diff"]["difference"] == 100.0
    (tmp_path / "a.json").write_text(json.dumps({"detailed_results": a}))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="bad.json: not an eval record"):
        mod.main([str(tmp_path / "a.json"), str(tmp_path / "bad.json")])
    mod.main([str(tmp_path / "a.json"), str(tmp_path / "a.json")])
    assert "| L2 | 1 | 0 | - | - | no problem verified in both |" in capsys.readouterr().out
