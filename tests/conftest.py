"""Shared test setup: keep every test's caches and outputs out of the user's home and checkout."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The tiny model and the converted embedded model are cached across tests (and across runs: the
# cache is keyed by content), but never in the real ~/.cache when TRITONRL_CACHE is set by CI.
os.environ.setdefault("TRITONRL_HOME", str(REPO))

# A suite started in the background of a non-interactive shell (`nohup make test &`) inherits SIGINT
# ignored, and so would every process it starts: the Ctrl-C tests (a run stopped where it stands, every
# rank and worker gone) would then see no interrupt at all. They test our handling, not the shell's.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """An outputs/ folder of the test's own."""
    out = tmp_path / "outputs"
    out.mkdir()
    return out


# The slowest modules, slowest first (`pytest --durations`, 2026-11-29 on a 2-core machine under load: 400,
# 390, 370, 330, 190, 175, 150, 125 and 80 s), run before the rest: under `make test`'s two xdist workers,
# which take whole files (--dist loadfile --no-loadscope-reorder), they then start at once instead of being
# left for last, where one worker would run them alone while the other waits.
SLOW_FIRST = ("test_data_conv.py", "test_tasks_verified.py", "test_rl_multi_process.py", "test_data_reduce_epilogue.py",
              "test_e2e_pipeline.py", "test_gpu_rl_session.py", "test_qwen7b_benchmark.py", "test_sft_resume.py",
              "test_verify_neighbours.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))  # stable: files stay whole
