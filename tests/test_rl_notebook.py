"""notebooks/03_rl.ipynb runs headless with papermill (smoke profile, both methods), from what
01_data and 02_sft leave in a run, and leaves the RL adapter, logs and chart where RunPaths says."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config

from rl_fixtures import prepare_run

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "03_rl.ipynb"


def test_notebook_is_commit_ready():
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    for name in ("profile", "run", "method", "n_samples", "top_k", "rounds", "rl_tasks", "tasks_per_round"):
        assert f"{name} = " in code[0].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert "start(globals())" in code[1].source


@pytest.mark.slow
@pytest.mark.parametrize("method", ["best_of_n", "grpo"])
def test_notebook_runs_both_methods(tmp_path, method):
    import papermill

    out_dir = tmp_path / "outputs"
    cfg = load_config("smoke", overrides={"outputs_dir": str(out_dir), "run": method})
    prepare_run(cfg, split=True)  # the split 01_data writes and an SFT adapter
    executed = tmp_path / "03_rl.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(executed), cwd=str(REPO), kernel_name="python3",
                               progress_bar=False, parameters={
                                   "profile": "smoke", "run": method, "method": method, "n_samples": 2,
                                   "rounds": 2, "outputs_dir": str(out_dir)})
    paths = cfg.paths
    assert models.checkpoint_complete(paths.rl_checkpoint)
    marker = json.loads((paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["method"] == method and marker["final"]
    log = [json.loads(x) for x in paths.rl_log.read_text().splitlines()]
    assert log and all(r["method"] == method for r in log)
    assert paths.curriculum_log.is_file() and paths.rl_best.is_file()
    assert paths.chart("rl_curves").is_file()  # two rounds / steps: a curve, shown inline and saved
    outputs = [o for c in nbformat.read(str(executed), 4).cells for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs)
    assert f"RL {method}" in text and "verif/min" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # inline, not only on disk
    assert "Warning" not in text and "IProgress" not in text
