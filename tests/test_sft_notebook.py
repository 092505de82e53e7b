"""notebooks/02_sft.ipynb: committed clean, runs headless with papermill on the smoke profile."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records

pytestmark = pytest.mark.timeout(400)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_sft.ipynb"


def test_notebook_is_committed_clean_with_the_documented_parameters():
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    ns: dict = {}
    exec(params[0].source, ns)
    assert ns["profile"] == "auto" and ns["run"] == ""
    for name in ("epochs", "learning_rate", "lora_r", "max_samples", "per_device_batch_size"):
        assert ns[name] is None  # None = the profile's value
    assert "start(globals())" in code[1].source


@pytest.mark.slow
def test_notebook_trains_plots_and_says_where_the_checkpoint_is(run_dir, tmp_path):
    import papermill

    tiny_dir = str(models.tiny_model_dir())
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "nb"})
    write_records(cfg.paths.sft_train, toy_sft_records(4))
    out = tmp_path / "02_sft.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out), kernel_name="python3", progress_bar=False,
                               parameters={"profile": "smoke", "run": "nb", "outputs_dir": str(run_dir),
                                           "model": tiny_dir, "max_seq_len": 768, "epochs": 2,
                                           "max_samples": 4, "per_device_batch_size": 2})
    ckpt = cfg.paths.sft_checkpoint
    assert models.checkpoint_complete(ckpt)
    assert [r["step"] for r in read_jsonl(cfg.paths.sft_log)] == [1, 2, 3, 4]
    assert cfg.paths.chart("sft_loss").stat().st_size > 1000
    text = json.dumps(json.loads(out.read_text())["cells"])
    assert f"SFT adapter: {ckpt}" in text and "image/png" in text
    assert "Warning" not in text and "IProgress" not in text  # no progress-bar or deprecation notices
    # progress as text (the Trainer's own bar is an HTML widget: papermill and `tritonrl run` show none of it)
    assert "SFT step 1/4 (epoch 1 of 2): loss " in text and "SFT step 4/4 (epoch 2 of 2): loss " in text
    assert " left" in text and ("s/step" in text or "steps/s" in text)
    assert "<Figure" not in text and "gemm_4bit_forward" not in text  # no echoed repr, no bitsandbytes notice


@pytest.mark.slow
def test_notebook_without_data_names_the_data_stage(run_dir, tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as e:
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), kernel_name="python3",
                                   progress_bar=False,
                                   parameters={"profile": "smoke", "run": "empty", "outputs_dir": str(run_dir)})
    assert e.value.ename == "SFTDataError" and "01_data" in e.value.evalue
