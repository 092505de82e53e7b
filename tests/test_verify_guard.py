"""The candidate's process fenced in from the inside (tritonrl_lib.verify.candidate.guard), each case in a fresh
process: an audit hook, once added, stays for the life of the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).parent / "guard_cases"
ROOT = Path(__file__).resolve().parents[1]

RUNNER = r'''
import importlib.util, json, sys, time
import torch, triton, triton.language
from tritonrl_lib.verify.candidate.guard import Guard
from tritonrl_lib.verify.static.rules import import_verdict
cand = sys.argv[1]
guard = Guard(cand, trusted_files=[], watched={"torch": torch, "torch.cuda": torch.cuda, "time": time},
              denied_import=import_verdict)
guard.install()
spec = importlib.util.spec_from_file_location("tritonrl_candidate", cand)
module = importlib.util.module_from_spec(spec)
out = {}
try:
    spec.loader.exec_module(module)
    out["result"] = repr(module.run())[:200]
except BaseException as e:
    out["error"] = f"{type(e).__name__}: {e}"[:300]
out["flags"] = guard.flags
out["changed"] = guard.changed()
print("RESULT " + json.dumps(out))
'''

# case -> (flag expected, or None for an honest case that must run; replaced callables expected)
TABLE = {
    "gc": ("introspection:gc", []),
    "frames": ("introspection:frames", []),
    "tb": ("introspection:frames", []),
    "subproc": ("process", []),
    "ctypes": ("ctypes", []),
    "patch": (None, ["torch.cuda.synchronize"]),
    "honest": (None, []),
}


def run_case(name: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(CASES / f"case_{name}.py")], capture_output=True,
                          text=True, env=env, timeout=240)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-2000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("name", sorted(TABLE))
def test_guard_refuses_attacks_and_lets_honest_code_run(name):
    flag, changed = TABLE[name]
    out = run_case(name)
    if flag is None:
        assert out["flags"] == [], out
    else:
        assert flag in out["flags"] and "PermissionError" in out.get("error", ""), out
    assert out["changed"] == changed, out
    if name == "honest":
        assert out.get("result") == "True", out


def test_threads_cannot_start_and_nothing_leads_back():
    out = run_case("thread")
    assert "starting a thread is not allowed" in out.get("error", ""), out
