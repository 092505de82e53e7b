"""Stopping what a run started, for good (core/processes.py, and the multi-GPU RL launcher's `_stop` in
train/rl/launch.py): a signal held while a tree is killed arrives afterwards, even with other
threads running; a frozen-then-killed tree leaves nothing; the launcher's children are killed
whether they started before its SIGTERM or after it, or were orphaned when it exited; a second
Ctrl-C during the launcher's grace ends the grace and never the kill. And the launch's relay:
pipes closed, the status read from rank 0's file rather than its printed lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from tritonrl_lib.core.jsonio import read_json, write_json
from tritonrl_lib.core.processes import signals_held, stop_tree
from tritonrl_lib.train.rl import entry, launch
from tritonrl_lib.train.rl.run_frame import RLResult

from rl_fixtures import smoke_config


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_for_lines(proc: subprocess.Popen, n: int) -> list[int]:
    """The pids a fake launcher prints, one a line (itself is not among them)."""
    return [int(proc.stdout.readline()) for _ in range(n)]


def test_a_held_signal_arrives_after_the_block_even_with_other_threads_running():
    # a signal sent to the process may be delivered to any thread: masking the main thread alone
    # would not hold it (the reason signals_held uses handlers)
    busy = threading.Thread(target=time.sleep, args=(3,), daemon=True)
    busy.start()
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with signals_held() as held:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(20):  # bytecodes run: an unheld SIGINT would raise here
                time.sleep(0.01)
            assert held.arrived
            reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_stop_tree_kills_a_process_and_what_it_started():
    script = ("import subprocess, sys, time\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
              "print(c.pid, flush=True)\ntime.sleep(300)\n")
    root = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(root.stdout.readline())
        killed = stop_tree([psutil.Process(root.pid)])
        assert {p.pid for p in killed} == {root.pid, child}
        root.wait(timeout=5)
        assert not _alive(child)
    finally:
        root.kill()
        root.stdout.close()


# A stand-in for `accelerate launch`: one child at once; on SIGTERM, another child, then (unless told
# to ignore SIGTERM) it exits 0.6 s later, leaving both children orphaned.
FAKE_LAUNCHER = textwrap.dedent("""
    import signal, subprocess, sys, time
    EXIT = sys.argv[1] == "exit"
    def child():
        c = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
        print(c.pid, flush=True)
    def on_term(signum, frame):
        child()
        if EXIT:
            time.sleep(0.6)
            sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    child()
    while True:
        time.sleep(0.05)
""")


def _fake_launcher(mode: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", FAKE_LAUNCHER, mode], stdout=subprocess.PIPE, text=True)
    return proc, _wait_for_lines(proc, 1)[0]


def test_the_launchers_children_from_before_and_after_its_sigterm_are_killed_orphans_too(monkeypatch):
    monkeypatch.setattr(launch, "STOP_WAIT_S", 10.0)
    proc, first = _fake_launcher("exit")
    pids = [first]
    try:
        reader = threading.Thread(target=lambda: pids.extend(_wait_for_lines(proc, 1)), daemon=True)
        reader.start()
        t0 = time.monotonic()
        launch._stop(proc)
        reader.join(5)
        assert time.monotonic() - t0 < 8  # it exited on its own within the grace
        assert len(pids) == 2  # the child it started on SIGTERM
        assert proc.returncode is not None
        assert not [p for p in pids if _alive(p)]  # both orphaned on its exit, both killed
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.kill()
        proc.stdout.close()


def test_a_second_ctrl_c_ends_the_grace_and_still_kills_everything(monkeypatch):
    monkeypatch.setattr(launch, "STOP_WAIT_S", 60.0)
    proc, first = _fake_launcher("stay")  # never exits on SIGTERM: only the kill ends it
    pids = [first]
    try:
        reader = threading.Thread(target=lambda: pids.extend(_wait_for_lines(proc, 1)), daemon=True)
        reader.start()
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # the second Ctrl-C
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # arrives once the kill is done
            launch._stop(proc)
        assert time.monotonic() - t0 < 15  # not the 60 s grace
        reader.join(5)
        assert proc.returncode is not None and len(pids) == 2
        assert not [p for p in pids if _alive(p)]
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.kill()
        proc.stdout.close()


def test_the_relay_closes_its_pipes_and_keeps_what_a_progress_bar_left_showing(monkeypatch):
    made: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    said: list[str] = []
    script = ("import sys\nprint('relayed', flush=True)\n"
              "sys.stderr.write('step 1/3\\rstep 2/3\\rstep 3/3\\n'); sys.stderr.flush()\n")
    code, tail = launch._run_relayed([sys.executable, "-c", script], said.append, dict(os.environ))
    assert code == 0 and said == ["relayed"]
    assert "step 3/3" in tail and not any("1/3" in line or "2/3" in line for line in tail)
    assert made[0].stdout.closed and made[0].stderr.closed


# --------------------------------------------------------------------------- the launched run's status


def test_rank_0_writes_the_runs_status_to_the_file_the_launcher_names(tmp_path, monkeypatch):
    cfg = smoke_config(tmp_path)
    monkeypatch.setattr(entry, "load_config", lambda *a, **k: cfg)
    monkeypatch.setattr(entry, "_quiet_process", lambda: None)
    monkeypatch.setattr(entry, "train_rl", lambda *a, **k: RLResult("best_of_n", tmp_path, "resumed", rounds_done=3))
    status = tmp_path / "status.json"
    monkeypatch.setenv("RANK", "1")
    assert entry.main(["--status-file", str(status)]) == 0 and not status.exists()  # rank 1 stays quiet
    monkeypatch.setenv("RANK", "0")
    assert entry.main(["--status-file", str(status)]) == 0
    assert read_json(status) == {"status": "resumed", "rounds_done": 3}


def test_the_launcher_returns_the_status_rank_0_wrote_not_a_printed_line(tmp_path, monkeypatch):
    cfg = smoke_config(tmp_path, gpus="2")

    def ranks(write: str | None):
        def run(cmd, say, env):
            if write:
                write_json(Path(cmd[cmd.index("--status-file") + 1]), {"status": write})
            return 0, ["RL best_of_n trained: 2 rounds, ..."]  # what rank 0 printed says otherwise
        return run

    monkeypatch.setattr(launch, "_run_relayed", ranks("already_done"))
    assert launch.launch_rl(cfg, 2, "cpu", echo=lambda s: None).status == "already_done"
    monkeypatch.setattr(launch, "_run_relayed", ranks(None))
    with pytest.raises(launch.RLLaunchError, match="without rank 0 writing how the run ended"):
        launch.launch_rl(cfg, 2, "cpu", echo=lambda s: None)
