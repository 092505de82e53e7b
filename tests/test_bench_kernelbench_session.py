"""benchmarks/kernelbench_session.sh's `watch` on a machine where no plan was started: the device machine is
given back when a call's successor comes late, and the next call lands on a bare one. Watching there must
say so at once, not spend its W seconds printing empty progress (the twelfth session lost its last device
minutes that way)."""

import os
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kernelbench_session.sh"


def _watch(logs: Path, out: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "LOGS": str(logs), "OUT": str(out), "W": "120"}
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(SCRIPT), "watch"], env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - t0


def test_watch_on_a_bare_machine_stops_at_once(tmp_path):
    done, took = _watch(tmp_path / "logs", tmp_path / "out")
    assert done.returncode == 3
    assert "no plan was started on this machine" in done.stderr
    assert took < 20  # not the 30 s of a first progress line, let alone W
    assert not (tmp_path / "out" / "res.tgz").exists()  # nothing packed: there is nothing of the run to pack


def test_watch_packs_a_finished_plan_at_once(tmp_path):
    logs, run = tmp_path / "logs", tmp_path / "R"
    (run / "eval").mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    logs.mkdir()
    (logs / "root").write_text(str(run))
    (logs / "last").write_text("eval")
    (logs / "plan.log").write_text("00:00:00 end eval rc=0\n")
    (logs / "eval.done").write_text("0\n")
    done, took = _watch(logs, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert took < 20  # a plan already over is packed without waiting for a progress line
    listing = subprocess.run(["tar", "tzf", str(tmp_path / "out" / "res.tgz")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert "summary.json" in listing and "logs/eval.done" in listing
