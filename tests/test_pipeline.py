"""The notebook runner: order, parameters, resuming, failures, parameter validation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from notebook_fixtures import three_step_pipeline, two_stage_pipeline, write_notebook
from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.run import state as run_state
from tritonrl_lib.run.pipeline import NotebookFailed, discover_notebooks, notebooks_dir, run_pipeline

pytestmark = pytest.mark.timeout(300)


def _run(nb_dir, out, **kw):
    kw.setdefault("log", lambda s: None)
    return run_pipeline("smoke", run="t", overrides={"outputs_dir": str(out), **kw.pop("overrides", {})},
                        directory=nb_dir, live=False, **kw)


def test_discovers_numbered_notebooks_in_order(tmp_path):
    for name in ("02_b.ipynb", "01_a.ipynb", "10_late.ipynb", "notes.ipynb", "1_short.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in discover_notebooks(tmp_path)] == ["01_a.ipynb", "02_b.ipynb", "10_late.ipynb"]


def test_runs_in_order_passes_params_and_resumes(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs)
    res = _run(nbs, run_dir, overrides={"n_samples": 7})
    assert [s.status for s in res.steps] == ["ran", "ran"]
    data = res.config.paths.data_dir
    assert json.loads((data / "stage2.json").read_text()) == {"saw": 7}
    assert (res.config.paths.notebooks_dir / "02_read.ipynb").is_file()
    timings = json.loads(res.config.paths.timings.read_text())
    assert set(timings) == {"01_write", "02_read"} and timings["01_write"]["wall_s"] > 0

    # same command again: both complete, nothing re-runs
    res = _run(nbs, run_dir, overrides={"n_samples": 7})
    assert [s.status for s in res.steps] == ["skipped", "skipped"]
    assert json.loads((data / "stage1.json").read_text())["count"] == 1

    # a changed parameter re-runs (its outputs would differ); --force re-runs regardless
    res = _run(nbs, run_dir, overrides={"n_samples": 8})
    assert [s.status for s in res.steps] == ["ran", "ran"]
    assert json.loads((data / "stage2.json").read_text()) == {"saw": 8}
    res = _run(nbs, run_dir, overrides={"n_samples": 8}, force=True)
    assert json.loads((data / "stage1.json").read_text())["count"] == 3


def test_rerunning_one_stage_reruns_what_follows(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs)
    _run(nbs, run_dir)
    res = _run(nbs, run_dir, only=["02"], force=True)
    assert [s.status for s in res.steps] == ["skipped", "ran"] and not res.stale  # --force: the selected only
    res = _run(nbs, run_dir, only=["01"], force=True)
    assert [s.status for s in res.steps] == ["ran", "skipped"]  # 02 not selected
    assert [s.notebook for s in res.stale] == ["02_read"]  # and it is said to be stale
    res = _run(nbs, run_dir)
    # 01 is newer than 02's finished run, so 02 re-runs on what 01 now wrote; then both are complete
    assert [s.status for s in res.steps] == ["skipped", "ran"]
    assert [s.status for s in _run(nbs, run_dir).steps] == ["skipped", "skipped"]
    # editing 01 invalidates it, and therefore 02 after it
    write_notebook(nbs / "01_write.ipynb", ["n_samples = None", "outputs_dir = None"],
                   ["(paths.data_dir / 'stage1.json').write_text('{\"n_samples\": 1, \"count\": 0}')"])
    res = _run(nbs, run_dir)
    assert [s.status for s in res.steps] == ["ran", "ran"]


def test_work_redone_outside_the_runner_is_noticed_and_followed(tmp_path, run_dir):
    """The issue's sequence on notebooks named like the real ones: a step re-run by papermill with
    other settings is run again by the next `tritonrl run`, and so is everything after it."""
    import papermill

    nbs = tmp_path / "nbs"
    three_step_pipeline(nbs)
    assert [s.status for s in _run(nbs, run_dir).steps] == ["ran", "ran", "ran"]
    paths = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "t"}).paths
    rl_adapter = paths.rl_checkpoint / "adapter.txt"
    assert rl_adapter.read_text() == "rl n_samples=2 on sft lr=0.0002"

    # papermill notebooks/03_rl.ipynb ... -p n_samples 3: the RL adapter is replaced
    papermill.execute_notebook(str(nbs / "03_rl.ipynb"), str(tmp_path / "03.out.ipynb"), kernel_name="python3",
                               progress_bar=False, parameters={"run": "t", "outputs_dir": str(run_dir), "n_samples": 3})
    assert rl_adapter.read_text() == "rl n_samples=3 on sft lr=0.0002"
    # ... having warned first, in its own output, that it would replace what `tritonrl run` finished
    alone = "".join("".join(o.get("text", "")) for c in json.loads((tmp_path / "03.out.ipynb").read_text())["cells"]
                    for o in c.get("outputs", []))
    assert "WARNING: `tritonrl run` finished 03_rl in " in alone
    assert "with other settings (rl.n_samples 2 -> 3): it will replace that result (checkpoints/rl, " in alone
    assert "-p run NAME" in alone
    lines: list[str] = []
    res = _run(nbs, run_dir, log=lines.append)
    assert [s.status for s in res.steps] == ["skipped", "skipped", "ran"]
    # the next run says what happened, not only that a file changed
    why = res.steps[2].why
    assert why.startswith("checkpoints/rl changed after it finished: 03_rl was run on its own (papermill or "
                          "JupyterLab) on "), why
    assert "with other settings (rl.n_samples 2 -> 3)" in why and "running it again with this run's settings" in why
    assert any(x.startswith("[3/3] 03_rl: running (checkpoints/rl changed after it finished: 03_rl was run on its own")
               for x in lines)
    assert rl_adapter.read_text() == "rl n_samples=2 on sft lr=0.0002"  # the run's own settings, again
    # run by `tritonrl run`, a notebook does not warn
    ran = json.dumps(json.loads(paths.executed_notebook("03_rl").read_text())["cells"])
    assert "WARNING" not in ran

    # a setting 01 does not read: 01 stays, 02 and what follows run, each saying why
    res = _run(nbs, run_dir, overrides={"learning_rate": 0.001}, log=lines.append)
    assert [s.status for s in res.steps] == ["skipped", "ran", "ran"]
    assert res.steps[1].why == res.steps[2].why == "settings changed: sft.learning_rate 0.0002 -> 0.001"
    assert rl_adapter.read_text() == "rl n_samples=2 on sft lr=0.001"

    # --only leaves a stale step alone, and says so
    (paths.data_dir / "sft_train.jsonl").write_text('{"id": "edited"}\n')
    lines.clear()
    res = _run(nbs, run_dir, overrides={"learning_rate": 0.001}, only=["03"], log=lines.append)
    assert [s.status for s in res.steps] == ["skipped", "skipped", "skipped"]  # 03's own inputs are as it read them
    assert [s.notebook for s in res.stale] == ["01_data", "02_sft"]
    assert any("02_sft: not selected, and STALE: data/sft_train.jsonl changed since it ran" in x for x in lines)


def test_the_terminal_shows_what_a_running_notebook_prints_and_its_progress(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    three_step_pipeline(nbs)
    lines: list[str] = []
    _run(nbs, run_dir, log=lines.append)
    text = "\n".join(lines)
    # a printed line, indented under its step, between the step's own lines
    start = text.index("[2/3] 02_sft: running (not run by `tritonrl run` yet)")
    assert text.index("      SFT: resuming from checkpoint-1 (step 1)") > start
    assert text.index("[2/3] 02_sft: done in") > text.index("SFT: resuming from checkpoint-1")
    # the progress bar's final count (not its every redraw), and no warnings from the kernel
    assert "      train: 3/3 (100%)" in text and text.count("train: 3/3") == 1
    assert "Warning" not in text and "unknown parameter" not in text


def test_failing_notebook_stops_shows_error_keeps_copy(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs, fail_second=True)
    write_notebook(nbs / "03_never.ipynb", ["outputs_dir = None"], ["(paths.data_dir / 'never').write_text('x')"])
    with pytest.raises(NotebookFailed) as e:
        _run(nbs, run_dir)
    assert e.value.ename == "ValueError" and "stage two broke on purpose" in e.value.evalue
    assert e.value.executed.is_file()
    executed = json.loads(e.value.executed.read_text())
    assert any("stage two broke" in json.dumps(c.get("outputs", [])) for c in executed["cells"])
    root = run_dir / "t"
    assert not (root / "data" / "never").exists()  # the run stopped at the failure
    failed = json.loads((root / "notebooks" / ".02_read.done.json").read_text())
    assert failed["failed"] == "ValueError" and "settings" not in failed  # recorded as failed, never as done
    # 01 finished and is not redone on the next attempt
    assert (root / "notebooks" / ".01_write.done.json").exists()


def test_unknown_parameter_fails_before_anything_runs(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs)
    with pytest.raises(ConfigError, match="did you mean 'n_samples'"):
        _run(nbs, run_dir, overrides={"n_sample": 3})
    assert not (run_dir / "t" / "notebooks" / "01_write.ipynb").exists()


def test_papermill_direct_with_mistyped_parameter_names_it(tmp_path, run_dir):
    """`papermill nb out -p n_sampels 10` must not be silently ignored."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    nb = write_notebook(tmp_path / "01_x.ipynb", ["n_samples = None", "outputs_dir = None"], ["print(cfg.rl.n_samples)"])
    with pytest.raises(PapermillExecutionError) as e:
        papermill.execute_notebook(str(nb), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
                                   parameters={"n_sampels": 10, "outputs_dir": str(run_dir)})
    assert "n_sampels" in e.value.evalue and "n_samples" in e.value.evalue
    papermill.execute_notebook(str(nb), str(tmp_path / "out2.ipynb"), kernel_name="python3", progress_bar=False,
                               parameters={"n_samples": 10, "outputs_dir": str(run_dir)})
    out = json.loads((tmp_path / "out2.ipynb").read_text())
    assert "10" in json.dumps(out["cells"][-1]["outputs"])


def test_cli_run_reports_failure_and_exit_code(tmp_path, run_dir, monkeypatch):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs, fail_second=True)
    import tritonrl_lib.run.pipeline as pipeline
    from tritonrl_lib.cli import main

    monkeypatch.setattr(pipeline, "notebooks_dir", lambda: nbs)
    rc = main(["run", "--params", "smoke", "--run", "t", "-p", f"outputs_dir={run_dir}"])
    assert rc == 1
    rc = main(["run", "--params", "smoke", "-p", "n_sampels=3"])
    assert rc == 2


def test_cli_entry_point_installed_and_config_list_describes_every_setting():
    from tritonrl_lib.core.config import _leaf_paths
    from tritonrl_lib.core.settings_doc import DESCRIPTIONS

    out = subprocess.run([sys.executable, "-m", "tritonrl_lib.cli", "config", "--params", "smoke", "--list"],
                         capture_output=True, text=True, check=True).stdout
    assert set(DESCRIPTIONS) == set(_leaf_paths())  # a new setting needs its line in settings_doc.py
    lines = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith("(")}
    assert len(lines) == len(_leaf_paths())
    for name, path in _leaf_paths().items():
        assert lines[".".join(path)].rstrip().endswith(DESCRIPTIONS[name]), name
    assert "completions per task" in lines["rl.n_samples"]


@pytest.mark.parametrize("notebook", sorted(p.name for p in discover_notebooks(notebooks_dir())))
def test_papermill_sees_every_parameter_of_the_real_notebooks(notebook):
    # papermill reads a parameters cell line by line and silently drops a line it cannot parse
    # (a comment with a quote or '=' in it), then warns "unknown parameter" when one is passed
    import ast

    import papermill

    path = notebooks_dir() / notebook
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    declared = [t.id for node in ast.parse("".join(cell["source"])).body if isinstance(node, ast.Assign)
                for t in node.targets]
    inferred = list(papermill.inspect_notebook(str(path)))
    assert declared and inferred == declared


# --------------------------------------------------------------------------- how long, and interruptions


def test_the_run_starts_by_saying_how_long_the_profile_takes(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    two_stage_pipeline(nbs)
    lines: list[str] = []
    _run(nbs, run_dir, log=lines.append)
    minutes = load_config("smoke").expected_minutes
    assert lines[1].startswith(f"expected duration: about {minutes:.0f} minute") and \
        "(the smoke profile, measured; params/smoke.yaml says on what machine)" in lines[1], lines[:2]
    lines.clear()
    _run(nbs, run_dir, log=lines.append, overrides={"n_samples": 5})
    assert "your settings (n_samples) change it" in lines[1]


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu_long", "qwen7b", "smoke"])
def test_every_profile_has_its_measured_duration(profile):
    assert load_config(profile).expected_minutes > 0


def test_a_killed_kernel_ends_the_run_with_one_line(tmp_path, run_dir, monkeypatch, capsys):
    nbs = tmp_path / "nbs"
    write_notebook(nbs / "01_ok.ipynb", ["outputs_dir = None"], ["print('fine')"])
    write_notebook(nbs / "02_killed.ipynb", ["outputs_dir = None"],
                   ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"])  # the kernel, killed (as by the OOM killer)
    import tritonrl_lib.run.pipeline as pipeline
    from tritonrl_lib.cli import main

    monkeypatch.setattr(pipeline, "notebooks_dir", lambda: nbs)
    capsys.readouterr()
    rc = main(["run", "--params", "smoke", "--run", "t", "-p", f"outputs_dir={run_dir}"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tritonrl run: interrupted (its kernel died: killed, or out of memory?) during 02_killed, ")
    assert f"`tritonrl run --params smoke --run t -p outputs_dir={run_dir}` resumes from 02_killed" in err
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": "t"})
    assert run_state.why_stale(cfg, cfg.paths, "01_ok") is None  # finished before: kept
    assert run_state.why_stale(cfg, cfg.paths, "02_killed").startswith("it was interrupted (its kernel died) on ")


_CLI_ON = """
import sys
from pathlib import Path
import tritonrl_lib.run.pipeline as pipeline
from tritonrl_lib.cli import main
pipeline.notebooks_dir = lambda: Path(sys.argv[1])
sys.exit(main(sys.argv[2:]))
"""


def _wait_for(proc, out: Path, text: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.2)


def test_sigterm_ends_the_run_with_one_line_and_the_kernel_with_it(tmp_path, run_dir):
    nbs = tmp_path / "nbs"
    write_notebook(nbs / "01_slow.ipynb", ["outputs_dir = None"],
                   ["import time\nprint('sleeping', flush=True)\ntime.sleep(300)"])
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([sys.executable, "-c", _CLI_ON, str(nbs), "run", "--params", "smoke", "--run", "t",
                                 "-p", f"outputs_dir={run_dir}", "--force"], stdout=o, stderr=e)
    try:
        _wait_for(proc, out, "sleeping", 120)
        kernel = psutil.Process(proc.pid).children(recursive=True)
        assert kernel
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()
    text = err.read_text()
    assert text.count("\n") == 1 and "Traceback" not in text + out.read_text(), text
    # resuming repeats the command, less --force (which would redo what is finished)
    assert text.startswith("tritonrl run: interrupted (SIGTERM) during 01_slow, 0m ") and \
        f"`tritonrl run --params smoke --run t -p outputs_dir={run_dir}` resumes from 01_slow" in text, text
    gone, alive = psutil.wait_procs(kernel, timeout=10)
    assert not alive, alive


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_in_a_real_run_says_where_it_stopped_in_one_line(tmp_path, run_dir):
    """`tritonrl run --params smoke`, the real notebooks, Ctrl-C while 01_data verifies its examples (more
    of them than the verdict cache can know, so the verifier's workers run): one line, exit code 130,
    the step's kernel and the verifier's processes gone, and the next run says why it runs the step again."""
    tritonrl = Path(sys.executable).parent / "tritonrl"
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    args = ["run", "--params", "smoke", "-p", f"outputs_dir={run_dir}", "-p", "n_sft_examples=2000"]
    env = {**os.environ, "TRITONRL_CACHE": str(tmp_path / "cache")}  # a verdict cache of its own: nothing known
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([str(tritonrl), *args], stdout=o, stderr=e, env=env)
    try:
        _wait_for(proc, out, "[1/5] 01_data: running", 120)
        deadline, started = time.monotonic() + 120, []
        while time.monotonic() < deadline and proc.poll() is None:  # the kernel and its verifier workers
            started = psutil.Process(proc.pid).children(recursive=True)
            if len(started) >= 2:
                break
            time.sleep(0.5)
        assert len(started) >= 2 and "[2/5]" not in out.read_text(), out.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
    text = err.read_text()
    assert text.count("\n") == 1 and "Traceback" not in text + out.read_text(), text
    assert text.startswith("tritonrl run: interrupted (Ctrl-C) during 01_data, 0m "), text
    assert text.rstrip().endswith(f"`tritonrl {' '.join(args)}` resumes from 01_data (with what it had saved)"), text
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, alive
    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "n_sft_examples": 2000})
    assert run_state.why_stale(cfg, cfg.paths, "01_data").startswith("it was interrupted (Ctrl-C) on ")



def test_each_step_is_billed_by_the_gpus_its_own_code_occupies(monkeypatch):
    # on a host of 4 visible GPUs: not the host's count for every step, each step's own (step_device)
    from tritonrl_lib.run import pipeline as P

    monkeypatch.setattr(P, "_visible_gpus", lambda: (4, "NVIDIA H100 80GB HBM3"))
    cfg = load_config("cpu", overrides={"device": "auto", "data_verify_device": "auto", "gpus": "2"})
    got = {step: P.step_device(cfg, step)[1] for step in ("01_data", "02_sft", "03_rl", "04_eval", "05_report")}
    assert got == {"01_data": 4, "02_sft": 4, "03_rl": 2, "04_eval": 4, "05_report": 0}
    assert P.step_device(cfg, "04_eval") == ("4x NVIDIA H100 80GB HBM3", 4)
    cfg = load_config("cpu", overrides={"device": "auto", "data_verify_device": "cpu", "load_in_4bit": True,
                                        "gpus": "all"})
    got = {step: P.step_device(cfg, step)[1] for step in ("01_data", "02_sft", "03_rl")}
    assert got == {"01_data": 0, "02_sft": 1, "03_rl": 4}  # verified on the CPU; a quantised model on one GPU
    cfg = load_config("cpu")  # device: cpu, whatever the host has
    assert P.step_device(cfg, "04_eval")[1] == 0 and P.step_device(cfg, "04_eval")[0].startswith("cpu (")
