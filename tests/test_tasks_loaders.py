"""Task loaders: the built-in suite, a KernelBench checkout, the KernelBench dataset layout."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tritonrl_lib.tasks import (
    SIZES,
    TaskFormatError,
    TaskSourceError,
    all_families,
    category_of,
    load_builtin,
    load_manifest,
    load_tasks,
    module_constants,
    parse_kb_source,
)

FIXTURE = Path(__file__).parent / "fixtures" / "kernelbench"
FIXTURE_FILES = sorted((FIXTURE / "KernelBench").glob("level*/*.py"))


# ---------------------------------------------------------------------------------------------
# built-in suite


@pytest.fixture(scope="module")
def suites():
    return {size: load_builtin(size) for size in SIZES}


def test_builtin_suite_has_enough_tasks_with_unique_ids(suites):
    tasks = suites["small"]
    by_level = {lvl: [t for t in tasks if t.level == lvl] for lvl in (1, 2)}
    assert len(by_level[1]) >= 40 and len(by_level[2]) >= 30
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(t.id == f"builtin/L{t.level}/{t.name}" and t.origin == "builtin" for t in tasks)
    assert [t.id for t in tasks] == [t.id for t in suites["full"]]
    assert load_tasks("builtin") == tasks


def test_builtin_families_come_from_the_shared_vocabulary(suites):
    for t in suites["small"]:
        assert t.op_family in all_families(t.level), t.id
        assert category_of(t.op_family) == t.category, t.id
        assert t.description, t.id


def test_builtin_sources_and_solutions_are_well_formed(suites):
    for t in suites["full"]:
        info = parse_kb_source(t.source, t.id)
        sol = t.reference_solution
        assert sol and "class ModelNew(nn.Module)" in sol and "@triton.jit" in sol, t.id
        assert "import triton.language as tl" in sol, t.id
        # ModelNew takes exactly the constructor arguments of Model.
        new_args = parse_kb_source(
            sol.replace("class ModelNew(", "class Model(") + "\ndef get_inputs():\n    return []\n"
            "\ndef get_init_inputs():\n    return []\n", t.id + " solution").init_args
        assert new_args == info.init_args, t.id
        assert t.source.startswith("import torch\nimport torch.nn as nn\n"), t.id


def test_size_presets_set_every_constant_and_change_only_the_numbers(suites):
    # a variant that shares its original's file (tasks/variants.py) finds the original's preset there
    owner = {t.meta["file"]: t for t in suites["full"] if not t.meta.get("variant_of") or
             Path(t.meta["file"]).stem == t.name}
    for small, full in zip(suites["small"], suites["full"]):
        entry = small.meta["sizes"]
        assert module_constants(small.source) == entry["small"], small.id
        assert module_constants(full.source) == entry["full"], full.id
        changed = [ln for ln in difflib.ndiff(small.source.splitlines(), full.source.splitlines())
                   if ln[:1] in "+-"]
        changed_names = {ln[2:].split("=")[0].strip() for ln in changed}
        assert changed_names <= set(entry["small"]), small.id
        # the file on disk holds exactly one of the two presets (full sizes, for people reading it)
        on_disk = module_constants((Path(load_manifest()[0].path).parent.parent / small.meta["file"]).read_text())
        assert on_disk == owner[small.meta["file"]].meta["sizes"]["full"], small.id
        assert small.meta["size"] == "small" and full.meta["size"] == "full"


def test_a_broken_manifest_names_every_bad_row(tmp_path, monkeypatch):
    from tritonrl_lib.tasks import builtin_suite

    root = tmp_path / "builtin"
    shutil.copytree(builtin_suite.BUILTIN_DIR, root)
    manifest = json.loads((root / "manifest.json").read_text())
    rows = manifest["tasks"]
    rows[0]["op_family"] = "frobnicate"
    rows[1]["category"] = "reduction"
    rows.append(dict(rows[2]))  # a duplicate id
    (root / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(builtin_suite, "BUILTIN_DIR", root)
    monkeypatch.setattr(builtin_suite, "MANIFEST_PATH", root / "manifest.json")
    with pytest.raises(TaskFormatError) as err:
        load_builtin("small")
    msg = str(err.value)
    assert "unknown op family 'frobnicate'" in msg
    assert f"op_family {rows[1]['op_family']!r} belongs to category 'elementwise', not 'reduction'" in msg
    assert f"({rows[2]['id']}): duplicate id" in msg

    # a preset that forgets a constant would silently keep the file's own (full) value
    manifest["tasks"] = rows[2:3]
    del manifest["tasks"][0]["sizes"]["small"]["dim"]
    del manifest["tasks"][0]["sizes"]["full"]["dim"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TaskFormatError, match="sizes.small in the manifest leaves dim unset"):
        load_builtin("small")


def test_builtin_filters():
    l2 = load_tasks("builtin", levels=[2])
    assert l2 and all(t.level == 2 for t in l2)
    assert [t.id for t in load_tasks("builtin", levels=2, limit=3)] == [t.id for t in l2[:3]]
    assert load_tasks("builtin", limit=0) == []
    with pytest.raises(ValueError, match="data.task_size"):
        load_tasks("builtin", size="huge")


# ---------------------------------------------------------------------------------------------
# KernelBench checkout


def test_checkout_loads_unchanged_files_from_root_or_subfolder():
    tasks = load_tasks(str(FIXTURE))
    assert [t.id for t in tasks] == [
        "kernelbench/L1/1_Square_matrix_multiplication_", "kernelbench/L1/19_ReLU", "kernelbench/L1/23_Softmax",
        "kernelbench/L2/4_Conv2d_Mish_Mish", "kernelbench/L2/12_Gemm_Multiply_LeakyReLU", "kernelbench/L3/1_MLP",
    ]
    relu = tasks[1]
    assert relu.name == "19_ReLU" and relu.level == 1 and relu.origin == "kernelbench-checkout"
    assert relu.source == (FIXTURE / "KernelBench/level1/19_ReLU.py").read_text()
    assert relu.description == "A model that applies a ReLU activation."
    assert relu.reference_solution is None
    assert load_tasks(str(FIXTURE / "KernelBench")) == tasks
    assert load_tasks(str(FIXTURE), size="full") == tasks  # external sizes stay as published
    assert [t.name for t in load_tasks(str(FIXTURE), levels=[2, 3], limit=2)] == [
        "4_Conv2d_Mish_Mish", "12_Gemm_Multiply_LeakyReLU"]


def _copy_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "KernelBench-main"
    shutil.copytree(FIXTURE, root)
    return root


BAD_FILES = {
    "90_Syntax.py": ("import torch\nclass Model(nn.Module)\n    pass\n", "syntax error at line 2"),
    "91_NoModel.py": ("import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
                      "        return x\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n",
                      "defines no `class Model`"),
    "92_NoInputs.py": ("import torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
                       "\ndef get_init_inputs():\n    return []\n", "defines no `get_inputs()`"),
    "93_NoInit.py": ("import torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
                     "\ndef get_inputs():\n    return []\n", "defines no `get_init_inputs()`"),
    "94_InputsList.py": ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                         "        return x\n\nget_inputs = [torch.randn(4)]\n\ndef get_init_inputs():\n    return []\n",
                         "`get_inputs` is a variable assigned on line 8, not a function"),
}


def test_checkout_reports_every_malformed_file_at_once(tmp_path):
    root = _copy_checkout(tmp_path)
    for name, (code, _) in BAD_FILES.items():
        (root / "KernelBench/level1" / name).write_text(code)
    with pytest.raises(TaskFormatError) as err:
        load_tasks(str(root))
    msg = str(err.value)
    assert msg.startswith(f"{len(BAD_FILES)} task files are not valid KernelBench tasks:")
    for name, (_, what) in BAD_FILES.items():
        line = next(ln for ln in msg.splitlines() if name in ln)
        assert what in line and "Fix:" in line, line
    assert "19_ReLU" not in msg
    # a level that is filtered out is not read, so its broken files do not block the others
    assert len(load_tasks(str(root), levels=[2])) == 2


def test_one_malformed_file_names_the_file(tmp_path):
    root = _copy_checkout(tmp_path)
    bad = root / "KernelBench/level2/93_NoInit.py"
    bad.write_text(BAD_FILES["93_NoInit.py"][0])
    with pytest.raises(TaskFormatError, match=r"93_NoInit.py is not a valid KernelBench task:\n.*get_init_inputs"):
        load_tasks(str(root))


def test_unknown_sources_say_what_is_accepted(tmp_path):
    with pytest.raises(TaskSourceError, match="unknown task source 'no such thing'"):
        load_tasks("no such thing")
    for missing in (str(tmp_path / "nonexistent"), "./nowhere", "~/not/here", "tables.parquet"):
        with pytest.raises(TaskSourceError, match="no such file or folder"):  # a path, not an unknown kind
            load_tasks(missing)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TaskSourceError, match="KernelBench checkout"):
        load_tasks(str(tmp_path / "notes.txt"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaskSourceError, match="no KernelBench level folders"):
        load_tasks(str(empty))


# ---------------------------------------------------------------------------------------------
# KernelBench dataset layout


def _rows() -> list[dict]:
    rows = []
    for path in FIXTURE_FILES:
        pid = int(path.stem.split("_")[0])
        rows.append({"code": path.read_text(), "level": int(path.parent.name[-1]), "name": path.stem,
                     "problem_id": pid})
    return rows


def test_parquet_file_with_the_dataset_columns(tmp_path):
    path = tmp_path / "kernelbench.parquet"
    pd.DataFrame(_rows()).to_parquet(path)
    tasks = load_tasks(str(path))
    checkout = {t.id: t for t in load_tasks(str(FIXTURE))}
    assert [t.id for t in tasks] == list(checkout)
    for t in tasks:
        assert t.source == checkout[t.id].source and t.origin == "kernelbench-dataset"
        assert t.meta["problem_id"] == int(t.name.split("_")[0])
    assert [t.name for t in load_tasks(str(path), levels=[1], limit=2)] == ["1_Square_matrix_multiplication_",
                                                                           "19_ReLU"]


def test_directory_of_parquet_splits_and_jsonl(tmp_path):
    rows = _rows()
    folder = tmp_path / "data"
    folder.mkdir()
    for level in (1, 2, 3):
        pd.DataFrame([r for r in rows if r["level"] == level]).to_parquet(folder / f"level_{level}-00000.parquet")
    assert len(load_tasks(str(folder))) == len(rows)
    jsonl = tmp_path / "kb.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [t.id for t in load_tasks(str(jsonl))] == [t.id for t in load_tasks(str(folder))]


def test_table_errors_name_columns_and_rows(tmp_path):
    path = tmp_path / "wrong.parquet"
    pd.DataFrame([{"python_code": "x", "level": 1}]).to_parquet(path)
    with pytest.raises(TaskSourceError, match=r"lacks the KernelBench column\(s\) code, name, problem_id"):
        load_tasks(str(path))
    rows = _rows() + [{"code": BAD_FILES["92_NoInputs.py"][0], "level": 1, "name": "92_NoInputs", "problem_id": 92}]
    pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(TaskFormatError, match=r"wrong.parquet row 6 \(92_NoInputs\).*get_inputs"):
        load_tasks(str(path))


def test_hub_name_goes_through_datasets(monkeypatch):
    datasets = pytest.importorskip("datasets")
    rows = _rows()
    hub = datasets.DatasetDict({
        f"level_{lvl}": datasets.Dataset.from_list([r for r in rows if r["level"] == lvl]) for lvl in (1, 2, 3)
    })
    asked = []
    monkeypatch.setattr(datasets, "load_dataset", lambda name, *a, **k: asked.append(name) or hub)
    tasks = load_tasks("ScalingIntelligence/KernelBench", levels=[1, 2])
    assert asked == ["ScalingIntelligence/KernelBench"]
    assert [t.id for t in tasks] == [t.id for t in load_tasks(str(FIXTURE), levels=[1, 2])]


def test_hub_name_offline_gives_a_clear_error(monkeypatch):
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    for env in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(env, "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(TaskSourceError, match="could not load the hub dataset 'nobody/no-such-kernelbench'.*parquet"):
        load_tasks("nobody/no-such-kernelbench")
