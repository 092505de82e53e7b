"""Small numbered notebooks for pipeline tests, written the way the real ones are: a parameters
cell, `start(globals())`, thin library calls."""

from __future__ import annotations

from pathlib import Path

import nbformat


def write_notebook(path: Path, param_lines: list[str], body: list[str], step: str | None = None) -> Path:
    """`step`: the notebook names its pipeline step (`STEP = ...`), as the real ones do."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("\n".join(['profile = "smoke"', 'run = ""', *param_lines]))
    params.metadata["tags"] = ["parameters"]
    setup = nbformat.v4.new_code_cell("from tritonrl_lib.run.notebook import start\n"
                                      + (f"STEP = {step!r}\n" if step else "") + "cfg, paths = start(globals())")
    nb.cells = [params, setup, *[nbformat.v4.new_code_cell(src) for src in body]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def two_stage_pipeline(directory: Path, fail_second: bool = False) -> list[Path]:
    """01 writes a file in the run's data dir; 02 reads it (and optionally fails)."""
    first = write_notebook(directory / "01_write.ipynb", ["n_samples = None", "outputs_dir = None"], [
        "import json, time\n"
        "marker = paths.data_dir / 'stage1.json'\n"
        "count = json.loads(marker.read_text())['count'] + 1 if marker.exists() else 1\n"
        "marker.write_text(json.dumps({'n_samples': cfg.rl.n_samples, 'count': count}))",
    ])
    body = ["import json\n"
            "stage1 = json.loads((paths.data_dir / 'stage1.json').read_text())\n"
            "(paths.data_dir / 'stage2.json').write_text(json.dumps({'saw': stage1['n_samples']}))"]
    if fail_second:
        body.append("raise ValueError('stage two broke on purpose')")
    second = write_notebook(directory / "02_read.ipynb", ["outputs_dir = None"], body)
    return [first, second]


def three_step_pipeline(directory: Path) -> list[Path]:
    """Notebooks named like the real 01 -> 03, each writing where its real namesake does (RunPaths),
    in seconds: 01 the SFT data, 02 an "adapter" made from it, 03 an "RL adapter" made from that.
    02 prints a resume line and draws a text progress bar, as the real one does."""
    first = write_notebook(directory / "01_data.ipynb", ["n_sft_examples = None", "outputs_dir = None"], [
        "paths.sft_train.write_text('{\"id\": \"a\"}\\n' * cfg.data.n_sft_examples)"], step="01_data")
    second = write_notebook(directory / "02_sft.ipynb", ["learning_rate = None", "outputs_dir = None"], [
        "import sys, time\n"
        "from tqdm.auto import tqdm\n"
        "print('SFT: resuming from checkpoint-1 (step 1)')\n"
        "for _ in tqdm(range(3), desc='train', file=sys.stderr, mininterval=0):\n"
        "    time.sleep(0.05)\n"
        "paths.sft_checkpoint.mkdir(parents=True, exist_ok=True)\n"
        "n = len(paths.sft_train.read_text().splitlines())\n"
        "(paths.sft_checkpoint / 'adapter.txt').write_text(f'sft lr={cfg.sft.learning_rate} on {n}')"], step="02_sft")
    third = write_notebook(directory / "03_rl.ipynb", ["n_samples = None", "outputs_dir = None"], [
        "paths.rl_checkpoint.mkdir(parents=True, exist_ok=True)\n"
        "sft = (paths.sft_checkpoint / 'adapter.txt').read_text().split(' on ')[0]\n"
        "(paths.rl_checkpoint / 'adapter.txt').write_text(f'rl n_samples={cfg.rl.n_samples} on {sft}')"],
        step="03_rl")
    return [first, second, third]
