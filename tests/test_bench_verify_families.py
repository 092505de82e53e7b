"""benchmarks/verify_families.py: generated examples of named families through the verifier."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "verify_families.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_an_unknown_family_or_range_is_refused_naming_the_fix():
    done = _run("no_such_family")
    assert done.returncode == 2 and "no template for ['no_such_family']" in done.stderr and "gemm_chain" in done.stderr
    done = _run("relu", "--first", "3", "--last", "2")
    assert done.returncode == 2 and "--last 2 is before --first 3" in done.stderr


@pytest.mark.slow
def test_examples_pass_and_the_count_is_printed():
    done = _run("relu", "--first", "1", "--last", "2", "--params", "smoke")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 pass" in done.stdout
