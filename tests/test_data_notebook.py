"""notebooks/01_data.ipynb: committed clean, runs headless with papermill on the smoke profile,
writes the run's data files through RunPaths, and skips the generation when they are current."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tritonrl_lib.core.config import load_config
from tritonrl_lib.data import Split, read_difficulty_labels, read_jsonl, read_sft_examples
from tritonrl_lib.tasks.task import Task

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_data.ipynb"

pytestmark = pytest.mark.timeout(400)


def test_notebook_is_committed_clean_with_its_parameters():
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and params[0] is code[0]
    ns: dict = {}
    exec(params[0].source, ns)
    assert ns["profile"] == "auto" and ns["run"] == ""
    for name in ("task_source", "task_size", "kernelbook_source", "n_sft_examples", "heldout_fraction", "seed"):
        assert ns[name] is None  # None = the profile's value
    assert "start(globals())" in code[1].source
    text = "\n".join(c.source for c in code)
    assert "/data/" not in text and ".jsonl\"" not in text  # paths come from RunPaths only


@pytest.mark.slow
def test_smoke_run_writes_well_formed_data_then_skips_when_current(run_dir, tmp_path):
    import papermill

    params = {"profile": "smoke", "run": "data", "outputs_dir": str(run_dir)}
    out = tmp_path / "01_data.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out), kernel_name="python3", progress_bar=False,
                               parameters=params)
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "data"})
    paths = cfg.paths

    examples = read_sft_examples(paths.sft_train)
    assert len(examples) == cfg.data.n_sft_examples
    split = Split.load(paths.split)
    assert split.seed == cfg.seed and split.heldout_families and split.heldout_task_ids
    assert all(e.verified and e.op_family in split.train_families for e in examples)  # never a held-out family
    assert split.counts["sft_examples"] == len(examples) and split.settings["n_sft_examples"] == len(examples)

    labels = read_difficulty_labels(paths.difficulty_labels)
    tasks = [Task.from_dict(d) for d in read_jsonl(paths.tasks_manifest)]
    assert [r.id for r in labels] == [t.id for t in tasks] and len(tasks) >= 70
    assert {r.level for r in labels} <= {1, 2, 3}
    assert all(t.meta["split"] in ("train", "heldout", "heldout_in_family") for t in tasks)
    assert {t.id for t in tasks if t.meta["split"] == "heldout"} == set(split.heldout_task_ids)
    assert {t.id for t in tasks if t.meta["split"] == "heldout_in_family"} == set(split.heldout_in_family_ids)
    assert split.heldout_in_family_ids  # held-out set (a): unseen tasks of the train families
    assert paths.chart("difficulty").stat().st_size > 1000

    cells = json.loads(out.read_text())["cells"]
    text = json.dumps(cells)
    assert "image/png" in text and "The target completion" in text and "generating SFT data" in text
    assert "Warning" not in text and "IProgress" not in text  # no progress-bar or deprecation notices

    # same settings again: the notebook says so and does not regenerate
    before = paths.sft_train.stat().st_mtime_ns
    out2 = tmp_path / "01_data.again.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out2), kernel_name="python3", progress_bar=False,
                               parameters=params)
    assert "generation skipped" in out2.read_text()
    assert paths.sft_train.stat().st_mtime_ns == before
