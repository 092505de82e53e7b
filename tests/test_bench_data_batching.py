"""benchmarks/data_batching.py: a verdict cache's durations replayed through the pool's batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import data_batching as db  # noqa: E402


def test_a_batch_waits_for_its_slowest_job_and_one_batch_waits_once():
    times = [10.0, 1.0, 1.0, 1.0]
    # batches of 2 on 2 workers: [10, 1] ends at 10, then [1, 1] at 11
    assert db.replay(times, 2, 2) == 11.0
    # one batch: the second worker takes the three short jobs while the first runs the long one
    assert db.replay(times, 2, 4) == 10.0
    assert db.replay(times, 1, 4) == 13.0
    with pytest.raises(ValueError, match="at least 1"):
        db.replay(times, 0, 4)


def test_durations_are_read_from_a_verdict_cache_and_the_table_compares_the_policies(tmp_path, capsys):
    cache = tmp_path / "verdicts"
    (cache / "ab").mkdir(parents=True)
    for i, t in enumerate([30.0] + [1.0] * 63):
        (cache / "ab" / f"{i:03d}.json").write_text(json.dumps({"reason": "ok", "duration_s": t}))
    (cache / "ab" / "broken.json").write_text("{not json")
    (cache / "ab" / "none.json").write_text(json.dumps({"reason": "ok"}))
    assert sorted(db.durations(cache)) == [1.0] * 63 + [30.0]
    assert db.main([str(cache), "--workers", "2", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("64 verdicts, 93 s of verification")
    rows = [r for r in out.splitlines() if r.startswith("| 2 ") or r.startswith("| 4 ")]
    for row in rows:
        ideal, before, now = (float(c) for c in row.split("|")[2:5])
        assert ideal <= now <= before
    with pytest.raises(SystemExit):
        db.main([str(tmp_path / "missing")])
