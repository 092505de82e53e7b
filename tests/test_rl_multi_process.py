"""RL on two processes (gloo, the CPU), as `accelerate launch` runs it on the GPUs of one host
(train/rl/launch.py, distributed.py), for both methods with the tiny model and the real verifier:
every rank sees the same task draw per step and samples its own share of the groups, every
completion gets a reward, rank 0 saves one adapter that reloads, and a run whose rank dies mid-step
(SIGKILL, from a hook inside that rank) resumes, with the same command, on the same draws."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
import pytest
import torch
from safetensors.torch import load_file

from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.core.jsonio import read_json, read_jsonl
from tritonrl_lib.model import load as models
from tritonrl_lib.run.pipeline import run_pipeline
from tritonrl_lib.train.rl.curriculum import Curriculum, CurriculumSettings
from tritonrl_lib.train.rl.distributed import Ranks, check_grpo_split, gathered_by_slot
from tritonrl_lib.train.rl.launch import launch_command, processes_for, run_rl, settings_file
from tritonrl_lib.train.rl.log import read_rl_log
from tritonrl_lib.train.rl.reward_tasks import tasks_for_training
from tritonrl_lib.train.rl.start import pool_by_level, select_rl_tasks

from rl_fixtures import prepare_run, smoke_config
from rl_rank_hooks import DIE, NOTHING_TO_KEEP, STALL

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
# one BLAS thread per process (two processes share two cores); the hooks' module on the ranks' path
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
       "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO), os.environ.get("PYTHONPATH", "")])}
T, N = 2, 2  # tasks per step, samples per task


def _config(out: Path, method: str):
    return smoke_config(out, method=method, gpus="2", rounds=3, grpo_steps=3, tasks_per_round=T, n_samples=N,
                        top_k=1, workers=1)


def _killed_launch(cfg, hook: str, die: str) -> tuple[int, str]:
    """The launch `tritonrl run` makes for gpus=2, with rank `die`'s "RANK:STEP" SIGKILLing itself."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = launch_command(settings_file(cfg, Path(tmp)), 2, extra_candidates=hook)
        proc = subprocess.run(cmd, env={**ENV, DIE: die}, cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def _resume(cfg, hook: str) -> tuple[object, list[str]]:
    """The same run again through `run_rl`, as 03_rl's notebook calls it (the launcher relayed)."""
    messages: list[str] = []
    saved = dict(os.environ)
    os.environ.update({k: ENV[k] for k in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "PYTHONPATH")})
    try:
        result = run_rl(cfg, cfg.paths, extra_candidates=hook, echo=messages.append)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return result, messages


def _replayed_draw(cfg, curriculum_log: Path, step: int) -> list[str]:
    """What the curriculum draws at `step` after the logged steps before it (the rule a run that was
    never killed follows): resumed from a copy of the log, as a resumed run resumes from the log."""
    tasks = tasks_for_training(select_rl_tasks(cfg, cfg.paths), cfg.rl.train_task_scale)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "curriculum.jsonl"
        shutil.copy2(curriculum_log, log)
        cur = Curriculum.resume(CurriculumSettings.from_config(cfg.rl), cfg.seed, log, upto_step=step)
        return [t.id for t in cur.sample_tasks(pool_by_level(tasks), T, rng=cur.rng(step))]


def _check_ranks_and_draws(cfg, records: list[dict], key: str, before_kill: list[dict]) -> None:
    for rec in records:
        ranks = rec["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
        draw = ranks[0]["drawn"]
        assert ranks[1]["drawn"] == draw and len(draw) == T  # both ranks saw rank 0's draw
        assert sorted(s for r in ranks for s in r["slots"]) == list(range(T))  # each slot sampled by one rank
        assert all(r["candidates"] > 0 for r in ranks)  # both ranks sampled and verified
        assert draw == _replayed_draw(cfg, cfg.paths.curriculum_log, rec[key])  # the uninterrupted rule's draw
    for old in before_kill:  # what the killed run logged before it died was drawn again identically
        new = next(r for r in records if r[key] == old[key])
        assert new["ranks"][0]["drawn"] == old["ranks"][0]["drawn"] and new["tasks"] == old["tasks"]


def _check_adapter(cfg, processes: int = 2) -> None:
    paths = cfg.paths
    marker = json.loads((paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["final"] and marker["processes"] == processes
    saved = load_file(str(paths.rl_checkpoint / "adapter_model.safetensors"))
    sft = load_file(str(paths.sft_checkpoint / "adapter_model.safetensors"))
    assert saved.keys() == sft.keys() and any(not torch.equal(saved[k], sft[k]) for k in saved)  # it trained
    model, _ = models.load_policy(cfg, adapter=paths.rl_checkpoint, trainable=False)
    loaded = {n: p.detach() for n, p in model.named_parameters() if "lora_" in n}
    assert loaded and len(loaded) == len(saved)
    for name, weight in saved.items():  # the reloaded adapter is the saved one, weight for weight
        match = [v for n, v in loaded.items() if n.replace(".default", "").endswith(name.split("base_model.")[-1])]
        assert len(match) == 1 and torch.equal(match[0].cpu(), weight), name


# --------------------------------------------------------------------------- both methods, killed and resumed


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_best_of_n_on_two_processes_survives_a_killed_rank(tmp_path):
    cfg = _config(tmp_path, "best_of_n")
    prepare_run(cfg)
    hook = "rl_rank_hooks:best_of_n_candidates"

    code, output = _killed_launch(cfg, hook, die="0:1")  # rank 0 (the curriculum's) dies in round 1
    assert code != 0, output[-3000:]
    before = read_rl_log(cfg.paths)
    assert [r["round"] for r in before] == [0], output[-3000:]
    assert not json.loads((cfg.paths.rl_checkpoint / models.MARKER).read_text())["final"]

    result, messages = _resume(cfg, hook)
    assert result.status == "resumed" and result.rounds_done == 3, messages[-20:]
    assert any("resuming after round 0" in m for m in messages)
    assert sum(m.startswith("RL best_of_n resumed:") for m in messages) == 1  # rank 0 speaks, once
    log = read_rl_log(cfg.paths)
    assert [r["round"] for r in log] == [0, 1, 2]
    _check_ranks_and_draws(cfg, log, "round", before)
    assert [c["step"] for c in read_jsonl(cfg.paths.curriculum_log)] == [0, 1, 2]
    for r in range(3):  # every completion got a verdict and its reward, and both ranks' are there
        files = cfg.paths.rl_round(r)
        cands = read_jsonl(files.samples)
        for g in range(T):  # each first-draw group: n samples + the hook's 2 (1 for NOTHING_TO_KEEP)
            group = [c for c in cands if c["group"] == g]
            assert len(group) == N + (1 if group[0]["task_id"] == NOTHING_TO_KEEP else 2)
        assert all(isinstance(c["verdict"]["reward"], float) for c in cands)
        assert read_json(files.meta)["drawn"] == log[r]["ranks"][0]["drawn"]
    assert any(r["signal"]["drawn"] > T for r in log), "no group was redrawn: the redraw path went untested"
    _check_adapter(cfg)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("method", ["best_of_n", "grpo"])
def test_a_time_budget_stops_both_ranks_after_the_same_step(tmp_path, method):
    # rank 0 decides (a collective): a rank that skipped it, or decided alone, would hang the other
    cfg = smoke_config(tmp_path, method=method, gpus="2", rounds=3, grpo_steps=3, tasks_per_round=T, n_samples=N,
                       top_k=1, workers=1, rl_time_budget_s=0.001)
    prepare_run(cfg)
    result, messages = _resume(cfg, f"rl_rank_hooks:{method}_candidates")
    assert result.status == "time_budget" and result.rounds_done == 1, messages[-20:]
    assert sum("time budget:" in m for m in messages) == 1  # rank 0 says it, once
    key = "round" if method == "best_of_n" else "step"
    assert [r[key] for r in read_rl_log(cfg.paths)] == [0]
    marker = json.loads((cfg.paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["stopped"] == "time_budget" and not marker["final"] and marker["processes"] == 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_grpo_on_two_processes_survives_a_killed_rank(tmp_path):
    cfg = _config(tmp_path, "grpo")
    prepare_run(cfg)
    hook = "rl_rank_hooks:grpo_candidates"

    code, output = _killed_launch(cfg, hook, die="1:1")  # rank 1 dies in step 1, after checkpoint-1
    assert code != 0, output[-3000:]
    before = read_rl_log(cfg.paths)
    assert [r["step"] for r in before] == [0], output[-3000:]
    assert (cfg.paths.rl_checkpoint / "checkpoint-1" / "trainer_state.json").is_file()
    assert not models.checkpoint_complete(cfg.paths.rl_checkpoint)

    result, messages = _resume(cfg, hook)
    assert result.status == "resumed" and result.rounds_done == 3, messages[-20:]
    assert any("resuming from checkpoint-1" in m for m in messages)
    log = read_rl_log(cfg.paths)
    assert [r["step"] for r in log] == [0, 1, 2]
    _check_ranks_and_draws(cfg, log, "step", before)
    for rec in log:
        # every completion of both ranks has its reward: per group the reference (0.7, no timing on the
        # CPU) and the tiny model's sample (0); TRL's mean is over the rewards it gathered from both ranks
        assert sorted(rec["rewards"]) == [0.0] * T + [0.7] * T
        assert rec["trl"]["rewards/verifier_reward/mean"] == pytest.approx(sum(rec["rewards"]) / (T * N), abs=1e-6)
        assert rec["trl"]["grad_norm"] > 0
    assert [c["step"] for c in read_jsonl(cfg.paths.curriculum_log)] == [0, 1, 2]
    _check_adapter(cfg)


# --------------------------------------------------------------------------- `tritonrl run -p gpus=2`


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pipeline_runs_03_rl_on_two_processes_by_one_setting(tmp_path, monkeypatch):
    """`tritonrl run --only 03_rl -p gpus=2`: the notebook starts the launch and relays it; the step
    record, the adapter and the executed notebook come out as with one process."""
    for key in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(key, ENV[key])
    overrides = {"outputs_dir": str(tmp_path / "outputs"), "run": "two", "gpus": 2, "workers": 1, "rounds": 2}
    cfg = load_config("smoke", overrides=overrides)
    prepare_run(cfg, split=True)
    lines: list[str] = []
    result = run_pipeline("smoke", overrides=overrides, only=["03_rl"], log=lines.append, live=False)
    assert [s.status for s in result.steps if s.notebook == "03_rl"] == ["ran"], lines[-30:]
    paths = cfg.paths
    assert paths.step_record("03_rl").is_file()
    marker = json.loads((paths.rl_checkpoint / models.MARKER).read_text())
    assert marker["final"] and marker["processes"] == 2 and marker["round"] == 1
    log = read_rl_log(paths)
    assert [r["round"] for r in log] == [0, 1] and all(len(r["ranks"]) == 2 for r in log)
    text = "".join(o.get("text", "") for c in nbformat.read(str(paths.executed_notebook("03_rl")), 4).cells
                   for o in c.get("outputs", []))
    assert "RL on 2 CPU processes" in text and "RL best_of_n trained: 2 rounds" in text
    assert "Warning" not in text  # the ranks' stderr reads like the notebook's own
    assert any("RL on 2 CPU processes" in line for line in lines)  # the runner showed the relayed lines


INTERRUPTED = """
import sys
sys.path.insert(0, {tests!r})
from rl_fixtures import smoke_config
from tritonrl_lib.train.rl.launch import run_rl
cfg = smoke_config({out!r}, method="best_of_n", gpus="2", rounds=2, tasks_per_round=2, n_samples=2, top_k=1,
                   workers=1)
run_rl(cfg, cfg.paths, extra_candidates="rl_rank_hooks:best_of_n_candidates")
"""


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:  # gone, or a zombie (a candidate's process between its end and its reaping)
        return ""


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_interrupted_wait_stops_every_rank(tmp_path):
    """Ctrl-C (a kernel's interrupt) while run_rl waits: the launcher, both ranks and their verifier
    workers are gone, and the interrupt reaches the caller."""
    cfg = smoke_config(tmp_path, method="best_of_n", gpus="2", rounds=2, tasks_per_round=2, n_samples=2, top_k=1,
                       workers=1)
    prepare_run(cfg)
    caller = subprocess.Popen([sys.executable, "-c", INTERRUPTED.format(tests=str(TESTS), out=str(tmp_path))],
                              env={**ENV, STALL: "1"}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    family: list[psutil.Process] = []
    try:
        deadline = time.time() + 300
        while time.time() < deadline and caller.poll() is None:
            family = psutil.Process(caller.pid).children(recursive=True)
            ranks = [p for p in family if "tritonrl_lib.train.rl.entry" in _cmdline(p)]
            workers = [p for p in family if "tritonrl_lib.verify.worker.main" in _cmdline(p)]
            if len(ranks) >= 2 and len(workers) >= 2 and models.checkpoint_complete(cfg.paths.rl_round(0).adapter):
                break
            time.sleep(0.5)
        assert caller.poll() is None and len(ranks) >= 2 and len(workers) >= 2, "the ranks never got to work"
        time.sleep(2)  # the ranks are in their round, stalled in the hook
        family = psutil.Process(caller.pid).children(recursive=True)
        caller.send_signal(signal.SIGINT)
        _, err = caller.communicate(timeout=120)
        assert caller.returncode != 0 and "KeyboardInterrupt" in err
        gone, alive = psutil.wait_procs(family, timeout=30)
        assert not [p for p in alive if _running(p)], [_cmdline(p) for p in alive]
    finally:
        for proc in [*family, caller]:
            try:
                proc.kill()
            except (OSError, psutil.Error):
                pass


# --------------------------------------------------------------------------- the pieces, in one process


def test_gpus_setting_and_processes(tmp_path):
    assert processes_for(smoke_config(tmp_path))[0] == 1  # the default: one process, as always
    assert processes_for(smoke_config(tmp_path, gpus="3", device="cpu")) == (3, "cpu")
    assert processes_for(smoke_config(tmp_path, gpus="all", device="cpu")) == (1, "cpu")
    for bad in ("0", "two", "-1"):
        with pytest.raises(ConfigError, match="gpus"):
            smoke_config(tmp_path, gpus=bad)
    with pytest.raises(ConfigError, match="tasks_per_round"):
        check_grpo_split(smoke_config(tmp_path, method="grpo", tasks_per_round=3), 2)
    cfg = smoke_config(tmp_path, gpus="2")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = launch_command(settings_file(cfg, Path(tmp)), 2, port=29999, extra_candidates="m:f")
        assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
        assert cmd[cmd.index("--config_file") + 1] == str(REPO / "params" / "accelerate" / "ddp.yaml")
        assert cmd[cmd.index("--num_processes") + 1] == "2" and "29999" in cmd
        assert cmd[cmd.index("-m", 3) + 1] == "tritonrl_lib.train.rl.entry"
        # the settings file is the run's settings, its outputs folder absolute
        again = load_config(cmd[cmd.index("--params") + 1])
        assert again.paths.root == cfg.paths.root and again.rl == cfg.rl and again.gpus == "2"
        assert again.to_dict() == {**cfg.to_dict(), "outputs_dir": str(cfg.paths.root.parent.resolve()),
                                   "run": cfg.run_name}


def test_the_launcher_dies_with_the_process_that_started_it(tmp_path):
    """A kernel killed while it waits for a launch takes the launch with it (PR_SET_PDEATHSIG)."""
    script = tmp_path / "parent.py"
    script.write_text("import subprocess, sys, time\n"
                      "from tritonrl_lib.train.rl.launch import _DIE_WITH_PARENT\n"
                      "p = subprocess.Popen([sys.executable, '-c', _DIE_WITH_PARENT, '/bin/sleep', '120'])\n"
                      "print(p.pid, flush=True)\ntime.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=ENV)
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        deadline = time.time() + 20
        while child.cmdline()[:2] != ["/bin/sleep", "120"] and time.time() < deadline:
            time.sleep(0.05)
        assert child.cmdline()[:2] == ["/bin/sleep", "120"]  # the bootstrap exec'd what it was given
        parent.kill()
        parent.wait()
        gone, _ = psutil.wait_procs([child], timeout=10)
        assert gone or child.status() == psutil.STATUS_ZOMBIE
    finally:
        for proc in (parent, child):
            try:
                proc.kill()
            except (OSError, psutil.Error):
                pass


def test_one_process_is_every_exchange_the_identity():
    one = Ranks()
    assert one.is_main and one.share(5) == [0, 1, 2, 3, 4] and one.seed_offset == 0
    assert one.from_main(lambda: "drawn") == "drawn" and one.all_gather(7) == [7]
    assert Ranks(world=3, rank=1).share(7) == [1, 4]
    assert gathered_by_slot([{1: "b"}, {0: "a", 2: "c"}], 3) == {0: "a", 1: "b", 2: "c"}
    with pytest.raises(RuntimeError, match="more than one rank"):
        gathered_by_slot([{0: "a"}, {0: "b"}], 1)
    with pytest.raises(RuntimeError, match="expected 0..2"):
        gathered_by_slot([{0: "a"}, {2: "c"}], 3)
