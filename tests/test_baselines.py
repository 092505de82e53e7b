"""Per-machine reference times (`tritonrl baselines`), measured on the CPU on tasks written here in the
real KernelBench layout (`KernelBench/level1/1_Name.py`): resuming, failures recorded, the command."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tritonrl_lib.eval import baselines as B
from tritonrl_lib.cli import main
from tritonrl_lib.tasks import load_tasks

HEAD = "import torch\nimport torch.nn as nn\n\n"
TAIL = textwrap.dedent("""
    batch_size = 8
    dim = 32

    def get_inputs():
        return [torch.randn(batch_size, dim)]

    def get_init_inputs():
        return {init}
""")


def task_file(body: str, init: str = "[]") -> str:
    return HEAD + textwrap.dedent(body) + TAIL.format(init=init)


RELU = task_file('''
    class Model(nn.Module):
        """ReLU."""
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)
''')
SCALE = task_file('''
    class Model(nn.Module):
        """A linear layer, then a scale."""
        def __init__(self, dim):
            super().__init__()
            self.lin = nn.Linear(dim, dim)

        def forward(self, x):
            return self.lin(x) * 2.0
''', init="[dim]")
BROKEN = task_file('''
    class Model(nn.Module):
        """A reference that fails."""
        def __init__(self):
            super().__init__()

        def forward(self, x):
            raise RuntimeError("this reference is broken")
''')
DIES = task_file('''
    import os

    class Model(nn.Module):
        """A reference that ends its process."""
        def __init__(self):
            super().__init__()

        def forward(self, x):
            os._exit(3)
''')
HANGS = task_file('''
    import time

    class Model(nn.Module):
        """A reference that never returns."""
        def __init__(self):
            super().__init__()

        def forward(self, x):
            time.sleep(600)
            return x
''')
TIMING = {"warmup": 1, "trials": 5, "trim": 0.1}


def checkout(root: Path, files: dict[str, str]) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (level / f"{name}.py").write_text(text)
    return root


def test_measured_per_task_resumed_and_failures_recorded(tmp_path, monkeypatch, capsys):
    repo = checkout(tmp_path / "kb", {"1_Relu": RELU})
    out = tmp_path / "baselines"
    # no C++ compiler: torch.compile on the CPU is skipped and recorded so, eager is still measured
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert main(["baselines", "--tasks", str(repo), "--device", "cpu", "--out", str(out), "--params", "smoke",
                 "-p", "timing_warmup=1", "-p", "timing_trials=5", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "needs a C++ compiler" in printed.err
    head, relu_line = printed.out.splitlines()[:2]
    assert head.split()[:4] == ["task", "level", "eager", "ms"] and relu_line.startswith("kernelbench/L1/1_Relu")
    (path,) = out.glob("*.json")
    assert path.name == B.file_name(B.machine_identity("cpu")) and path.name.startswith("cpu_")
    assert f"file: {path}" in printed.out
    store = B.BaselineFile.load(path)
    assert store.machine["device"] == "cpu" and store.machine["torch"] and store.machine["triton"]
    (relu,) = load_tasks(str(repo))
    entry = store.entry(relu)
    assert entry["eager"]["ms"] > 0 and entry["eager"]["trials"] == 10  # eager timed against itself: 2 x 5
    assert entry["compile"]["reason"] == "skipped" and entry["timing"] == {"warmup": 1, "trials": 5, "trim": 0.1}
    monkeypatch.delenv("CXX")
    assert store.pending(relu, B.MODES, 600) == ["compile"]  # with a compiler, compile is measured next time

    # more tasks appear; the level folder itself is given: only the new ones are measured
    checkout(tmp_path / "kb", {"2_Scale": SCALE, "3_Broken": BROKEN, "4_Dies": DIES})
    tasks = load_tasks(str(repo / "KernelBench" / "level1"))
    assert [t.name for t in tasks] == ["1_Relu", "2_Scale", "3_Broken", "4_Dies"]
    store, counts = B.measure_baselines(tasks, modes=("eager",), device="cpu", out_dir=out, timing=TIMING,
                                        progress=False, log=lambda s: None)
    assert counts == {"measured": 3, "reused": 1}
    assert store.entry(relu) == entry  # untouched: not measured again
    scale = store.entry(tasks[1])["eager"]
    assert scale["ms"] > 0 and scale["median_ms"] > 0 and scale["trials"] == 10
    broken = store.entry(tasks[2])["eager"]
    assert broken["reason"] == "reference_failed" and "RuntimeError: this reference is broken" in broken["error"]
    dies = store.entry(tasks[3])["eager"]
    assert dies["reason"] == "crashed" and "exit code 3" in dies["error"]
    assert B.BaselineFile.load(path).entries == store.entries  # on disk, as after every task

    # a changed task is measured again (its key holds the source's hash); the others are not
    edited = RELU.replace("torch.relu(x)", "torch.relu(x) + 0")
    changed = load_tasks(str(checkout(tmp_path / "kb", {"1_Relu": edited})))[0]
    assert changed.id == relu.id and store.pending(changed, ("eager",), 600) == ["eager"]
    assert store.pending(tasks[2], ("eager",), 600) == []  # a recorded failure is not retried (force redoes it)

    rows = B.summary_rows(store, tasks)
    assert [r["problem"].split(":")[0] for r in rows] == ["compile", "", "eager", "eager"]
    assert rows[1]["eager_ms"] == pytest.approx(scale["ms"]) and rows[1]["compile_ms"] is None


def test_a_hanging_reference_is_stopped_at_the_time_limit_and_recorded(tmp_path):
    (task,) = load_tasks(str(checkout(tmp_path / "kb", {"1_Hangs": HANGS})))
    store, counts = B.measure_baselines([task], modes=("eager", "compile"), device="cpu", out_dir=tmp_path / "b",
                                        timing=TIMING, timeout_s=6, progress=False, log=lambda s: None)
    entry = store.entry(task)
    for mode in ("eager", "compile"):
        assert entry[mode]["reason"] == "timeout" and entry[mode]["timeout_s"] == 6
        assert "timed out after 6 s" in entry[mode]["error"]
    assert entry["wall_s"] < 30
    assert store.pending(task, ("eager",), 6) == []  # the same limit: not retried
    assert store.pending(task, ("eager",), 60) == ["eager"]  # a longer one: measured again
    assert json.loads(store.path.read_text())["entries"]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_killed_run_keeps_what_it_measured_and_leaves_nothing_running(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    repo = checkout(tmp_path / "kb", {"1_Relu": RELU, "2_Hangs": HANGS})
    out = tmp_path / "b"
    env = {**os.environ, "PYTHONPATH": str(Path(B.__file__).resolve().parent.parent)}
    cli = subprocess.Popen([sys.executable, "-m", "tritonrl_lib.cli", "baselines", "--tasks", str(repo), "--device",
                            "cpu", "--modes", "eager", "--out", str(out), "--params", "smoke", "-p", "timing_trials=5",
                            "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                "1_Relu" in p.read_text() for p in out.glob("*.json")):
            time.sleep(0.2)
        children = Path(f"/proc/{cli.pid}/task/{cli.pid}/children").read_text().split()
        time.sleep(0.5)
        children += Path(f"/proc/{cli.pid}/task/{cli.pid}/children").read_text().split()
    finally:
        cli.send_signal(signal.SIGKILL)  # as an out-of-memory killer or a closed session would
        cli.wait()
    assert children, "the hanging task's measurement should have been running"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(int(c)) for c in children):
        time.sleep(0.1)
    assert not any(_alive(int(c)) for c in children)  # the measurement died with it
    tasks = load_tasks(str(repo))
    (path,) = out.glob("*.json")
    store = B.BaselineFile.load(path)
    assert store.entry(tasks[0])["eager"]["ms"] > 0 and store.entry(tasks[1]) is None
    store, counts = B.measure_baselines(tasks[:1], modes=("eager",), device="cpu", out_dir=out, timing=TIMING,
                                        progress=False, log=lambda s: None)
    assert counts == {"measured": 0, "reused": 1}


def test_without_a_gpu_the_command_says_so_and_fails_unless_told_cpu(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    repo = checkout(tmp_path / "kb", {"1_Relu": RELU})
    assert main(["baselines", "--tasks", str(repo), "--out", str(tmp_path / "b"), "--params", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "no GPU is visible" in err and "--device cpu" in err
    assert not (tmp_path / "b").exists()
    assert main(["baselines", "--tasks", str(repo), "--device", "cpu", "--modes", "eager,jit",
                 "--out", str(tmp_path / "b"), "--params", "smoke"]) == 2
    assert "choose from eager,compile" in capsys.readouterr().err


def test_out_of_memory_is_told_apart_from_other_errors():
    import torch

    from tritonrl_lib.eval.baseline_measure import classify

    assert classify(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) == "oom"
    assert classify(RuntimeError("BackendCompilerFailed: ... CUDA out of memory ...")) == "oom"
    assert classify(RuntimeError("shape mismatch")) == "error"


@pytest.mark.slow
def test_torch_compile_is_timed_after_compilation_on_the_cpu(tmp_path):
    if B.compiler_for_cpu_compile() is None:
        pytest.skip("no C++ compiler for torch.compile on the CPU")
    (task,) = load_tasks(str(checkout(tmp_path / "kb", {"2_Scale": SCALE})))
    store, _ = B.measure_baselines([task], device="cpu", out_dir=tmp_path / "b", timing=TIMING, progress=False,
                                   log=lambda s: None)
    entry = store.entry(task)
    assert entry["eager"]["ms"] > 0
    comp = entry["compile"]
    assert comp["ms"] > 0 and comp["eager_paired_ms"] > 0 and comp["trials"] == 5
    # compilation takes seconds, one call of the compiled model far less: it was not in the timed trials
    assert comp["compile_s"] > 0.2 and comp["ms"] < 100 * entry["eager"]["ms"] + 5


def test_solved_in_measures_only_the_tasks_a_record_answered_correctly(tmp_path, capsys):
    """`--solved-in`: a task never answered correctly has no fast sample whatever its baseline, so only
    the solved ones are timed; a record that is not an eval record stops the command with the fix."""
    repo = checkout(tmp_path / "kb", {"1_Relu": RELU, "2_Scale": SCALE, "3_Broken": BROKEN})
    rec = tmp_path / "eval_sft.json"
    rec.write_text(json.dumps({"detailed_results": [
        {"id": "kernelbench/L1/2_Scale", "correct": True}, {"id": "kernelbench/L1/2_Scale", "correct": False},
        {"id": "kernelbench/L1/1_Relu", "correct": False}, {"id": "kernelbench/L2/9_Elsewhere", "correct": True}]}))
    out = tmp_path / "b"
    args = ["baselines", "--tasks", str(repo), "--device", "cpu", "--out", str(out), "--params", "smoke",
            "--modes", "eager", "-p", "timing_warmup=1", "-p", "timing_trials=5", "--quiet"]
    assert main([*args, "--solved-in", str(rec)]) == 0
    printed = capsys.readouterr()
    assert "1 of the 3 task(s) have a correct sample in 1 record(s); 1 solved task(s) are not among" in printed.err
    store = B.BaselineFile.load(next(out.glob("*.json")))
    assert [t.name for t in load_tasks(str(repo)) if store.entry(t)] == ["2_Scale"]

    # nothing solved: nothing to time, and no file claimed
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"detailed_results": [{"id": "kernelbench/L1/2_Scale", "correct": False}]}))
    assert main([*args, "--out", str(tmp_path / "b2"), "--solved-in", str(none)]) == 0
    assert "no task has a correct sample in these records: nothing to measure" in capsys.readouterr().out
    assert not (tmp_path / "b2").exists()

    (tmp_path / "bad.json").write_text('{"metrics": {}}')
    for bad in (tmp_path / "bad.json", tmp_path / "missing.json"):
        assert main([*args, "--solved-in", str(bad)]) == 2
        assert "not a readable eval record with detailed_results" in capsys.readouterr().err


def test_the_evaluation_times_the_tasks_it_solved_and_attaches_them(tmp_path, monkeypatch):
    """eval.baselines_measure=solved: after the evaluation, the solved tasks alone are timed into
    eval.baselines' folder and every record gets them (rewritten on disk). Timed on the CPU here, eager
    only (no C++ compiler: compile is recorded as skipped), through the evaluation's own wiring."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.eval import run as R
    from tritonrl_lib.eval.record import EvalSampling, build_record, read_record, write_record
    from tritonrl_lib.verify.verdict import Verdict

    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    relu, scale, broken = load_tasks(str(checkout(tmp_path / "kb", {"1_Relu": RELU, "2_Scale": SCALE,
                                                                    "3_Broken": BROKEN})))
    right = Verdict(stage="timing", correct=True, reason="ok", kernel_time_ms=0.5, ref_time_ms=1.0, speedup=2.0)
    wrong = Verdict(stage="tiny", correct=False, reason="mismatch:tiny")
    tasks = [relu, scale, broken]
    cfg = load_config("smoke", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "b",
                                          "baselines_measure": "solved", "timing_warmup": 1, "timing_trials": 5})
    results = []
    for stage, verdicts in (("sft", [right, wrong, wrong]), ("rl", [wrong, wrong, wrong])):
        rec = build_record(model_stage=stage, model_path=stage, tasks=tasks, completions=[["x"]] * 3,
                           verdicts=verdicts, sampling=EvalSampling(1, 0.2, 0.95, 64, 8, 0), task_source="kernelbench")
        path = tmp_path / f"eval_{stage}.json"
        write_record(path, rec)
        results.append(R.ModelEval(stage, "evaluated", path, rec))
    real = R.measure_for_solved
    monkeypatch.setattr(R, "resolve_device", lambda device: "cuda")  # the evaluation's GPU...
    monkeypatch.setattr(R, "measure_for_solved", lambda *a, **k: real(*a, **{**k, "device": "cpu"}))  # ...timed here
    said = []
    R.time_solved_tasks(cfg, tasks, results, False, said.append)
    store = B.BaselineFile.load(next(B.default_dir(tmp_path / "runs").glob("*.json")))
    assert [t.name for t in tasks if store.entry(t)] == ["1_Relu"]  # solved by sft; the others never solved
    assert any("for the 1 task(s) answered correctly" in s for s in said)
    assert store.entry(relu)["timing"] == {"warmup": 1, "trials": 5, "trim": cfg.verify.timing_trim}  # the run's
    for stage in ("sft", "rl"):
        on_disk = read_record(tmp_path / f"eval_{stage}.json")
        assert on_disk["detailed_results"][0]["baseline_eager_ms"] == pytest.approx(store.ms(relu, "eager"))
        assert on_disk["baselines"]["file"] == str(store.path)
    sft = read_record(tmp_path / "eval_sft.json")
    assert sft["detailed_results"][0]["speedup_vs_eager_baseline"] == pytest.approx(store.ms(relu, "eager") / 0.5)
    # every sample counts against the stored eager times: the unsolved tasks' as not fast
    assert sft["metrics"]["vs_eager_baseline"]["num_samples"] == 3

    # off, or one file named: nothing measured, said; nothing solved: nothing needed
    for setting in ("off", str(store.path)):
        said.clear()
        assert B.measure_for_solved([sft], tasks, setting=setting, outputs_dir=tmp_path, device="cpu",
                                    timing=TIMING, progress=False, log=said.append) is None
        assert "nothing measured" in said[0]
    assert B.measure_for_solved([read_record(tmp_path / "eval_rl.json")], tasks, setting="auto", outputs_dir=tmp_path,
                                device="cpu", timing=TIMING, progress=False, log=said.append) is None
    assert "no task answered correctly" in said[-1]
    # the folder holds another machine's file under this machine's name: said, the evaluation stands
    other = B.BaselineFile(store.path, {**store.machine, "name": "another GPU"})
    other.save()
    said.clear()
    R.time_solved_tasks(cfg, tasks, results, False, said.append)
    assert any(s.startswith("baselines: not measured:") and "another GPU" in s for s in said)
    # without a GPU the evaluation does not time them at all
    monkeypatch.setattr(R, "resolve_device", lambda device: "cpu")
    said.clear()
    R.time_solved_tasks(cfg, tasks, results, False, said.append)
    assert "times on a GPU only" in said[0]


def test_two_processes_saving_one_file_lose_nothing(tmp_path):
    """Two evaluations of one machine timing into the same folder at once (the four-GPU plan's two): each
    save keeps what the other wrote since it read the file."""
    relu, scale = load_tasks(str(checkout(tmp_path / "kb", {"1_Relu": RELU, "2_Scale": SCALE})))
    machine = B.machine_identity("cpu")
    path = tmp_path / B.file_name(machine)
    first, second = B.BaselineFile.open(path, machine), B.BaselineFile.open(path, machine)  # both read it empty
    first.record(relu, {"eager": {"ms": 1.0}}, TIMING, 0.1)
    first.save()
    second.record(scale, {"eager": {"ms": 2.0}}, TIMING, 0.1)
    second.save()
    on_disk = B.BaselineFile.load(path)
    assert on_disk.ms(relu, "eager") == 1.0 and on_disk.ms(scale, "eager") == 2.0
