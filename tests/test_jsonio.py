"""The run's one JSON / JSONL reader and writer, and its one policy for a damaged line."""

from __future__ import annotations

import json

import pytest

from tritonrl_lib.core.jsonio import DamagedFile, append_jsonl, read_json, read_jsonl, write_json, write_jsonl


def test_jsonl_round_trip_and_append(tmp_path):
    p = tmp_path / "logs" / "x.jsonl"
    assert write_jsonl(p, [{"a": 1}, {"b": "é"}]) == 2
    append_jsonl(p, {"c": [1, 2]})
    assert read_jsonl(p) == [{"a": 1}, {"b": "é"}, {"c": [1, 2]}]
    assert p.read_text(encoding="utf-8").endswith("\n")
    assert not list(p.parent.glob(".*.tmp"))  # the atomic writer's temp file is gone
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_a_torn_last_line_is_skipped(tmp_path):
    """A writer killed mid-append leaves a last line without its newline: that record never happened."""
    p = tmp_path / "log.jsonl"
    p.write_text('{"step": 1}\n\n{"step": 2}\n{"step": 3, "lo')
    assert read_jsonl(p) == [{"step": 1}, {"step": 2}]


@pytest.mark.parametrize("text, line", [
    ('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n', 2),  # damaged in the middle: not a kill
    ('{"step": 1}\n{"step": 2, "lo\n', 2),  # complete (newline-ended) but not JSON
    ('{"step": 1}\n[1, 2]\n', 2),  # JSON, but not a record
])
def test_any_other_damage_names_the_file_and_line(tmp_path, text, line):
    p = tmp_path / "log.jsonl"
    p.write_text(text)
    with pytest.raises(DamagedFile) as e:
        read_jsonl(p)
    assert e.value.line == line and f"{p}:{line}" in str(e.value) and "delete it and re-run" in str(e.value)


def test_json_write_is_atomic_and_reads_back(tmp_path):
    p = tmp_path / "a" / "state.json"
    write_json(p, {"path": tmp_path, "n": 1})
    assert read_json(p) == {"path": str(tmp_path), "n": 1}
    assert read_json(tmp_path / "none.json", None) is None
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json")
    p.write_text('{"n": ')
    with pytest.raises(DamagedFile, match="not JSON"):
        read_json(p, None)


def test_data_records_use_the_same_policy(tmp_path):
    from tritonrl_lib.data import read_jsonl as data_read_jsonl
    from tritonrl_lib.data import write_jsonl as data_write_jsonl

    p = tmp_path / "sft_train.jsonl"
    data_write_jsonl(p, [{"id": "a"}])
    with p.open("a") as f:
        f.write('{"id": ')
    assert data_read_jsonl(p) == [{"id": "a"}]
    assert json.loads(p.read_text().splitlines()[0]) == {"id": "a"}
