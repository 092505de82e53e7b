"""Shared test setup: keep every test's caches and outputs out of the user's home and checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The tiny model and the converted embedded model are cached across tests (and across runs: the
# cache is keyed by content), but never in the real ~/.cache when TRITONRL_CACHE is set by CI.
os.environ.setdefault("TRITONRL_HOME", str(REPO))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """An outputs/ folder of the test's own."""
    out = tmp_path / "outputs"
    out.mkdir()
    return out
