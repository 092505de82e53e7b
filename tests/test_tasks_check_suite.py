"""The suite author's checker (tritonrl_lib.tasks.check_suite): it must catch wrong solutions, and
its ahead-of-time CUDA compile check must catch kernels only the real compiler rejects."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tritonrl_lib.tasks import load_builtin
from tritonrl_lib.tasks.check_suite import CheckResult, compile_launches, dry_launches
from tritonrl_lib.tasks.kb_format import rewrite_constants

# Whether Triton's own helpers (tl.sum, ...) run under the interpreter is fixed when triton is first
# imported, and other tests import it without; so every CPU check runs in a fresh interpreter.
_CHILD = """
import pickle, sys
from tritonrl_lib.tasks.check_suite import check_task
task = pickle.load(open(sys.argv[1], "rb"))
try:
    result = check_task(task)
except Exception as e:
    result = e
pickle.dump(result, open(sys.argv[2], "wb"))
"""


def check_task(task, interpret: str = "1") -> CheckResult:
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "task.pkl", Path(d) / "result.pkl"
        src.write_bytes(pickle.dumps(task))
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(dst)], capture_output=True, text=True,
                              env={**os.environ, "TRITON_INTERPRET": interpret}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = pickle.loads(dst.read_bytes())
    if isinstance(result, Exception):
        raise result
    return result


def builtin(name: str, size: str = "small"):
    return next(t for t in load_builtin(size) if t.name == name)


RELU = builtin("relu")
HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"


def relu_solution(kernel_body: str, forward: str = "return launch(x)") -> str:
    return HEADER + f'''@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
{kernel_body}


def launch(x):
    out = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        {forward}
'''


def test_a_process_without_the_interpreter_is_refused_with_the_fix():
    try:
        check_task(RELU, interpret="0")
    except RuntimeError as e:
        assert "TRITON_INTERPRET=1" in str(e) and "fresh process" in str(e)
    else:
        raise AssertionError("check_task ran CPU kernels without the interpreter")


def test_reference_solution_passes_and_its_launches_are_recorded():
    result = check_task(RELU)
    assert result.ok, result.failures
    assert {launch.kernel for launch in result.launches} == {"relu_kernel"}
    launch = result.launches[0]
    assert dict(launch.signature) == {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32",
                                      "BLOCK_SIZE": "constexpr"}
    assert dict(launch.constexprs) == {"BLOCK_SIZE": 1024}


@pytest.mark.parametrize("solution, expected", [
    (relu_solution("    tl.store(out_ptr + offs, tl.abs(x), mask=mask)"), "original: max abs error"),
    # right on the original sizes only: the mask is dropped and the tail of a larger input is lost
    (relu_solution("    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask & (offs < 600))"),
     "sizes_x2: max abs error"),
    (relu_solution("    tl.store(x_ptr + offs, tl.maximum(x, 0.0), mask=mask)\n"
                   "    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)"), "modified its input"),
    (relu_solution("    tl.store(out_ptr + offs, x, mask=mask)", forward="return torch.relu(x)"),
     "no Triton kernel was launched"),
])
def test_wrong_solutions_are_caught(solution, expected):
    result = check_task(dataclasses.replace(RELU, reference_solution=solution))
    assert not result.ok
    assert any(expected in f for f in result.failures), result.failures


def test_compile_check_catches_what_the_interpreter_accepts():
    # `acc = 0` starts as an int32 and becomes fp32 in the loop: the interpreter (numpy) does not
    # mind, the Triton compiler refuses the loop-carried type change
    bad = HEADER + '''@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = 0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(out_ptr, acc)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty((), dtype=x.dtype, device=x.device)
        row_sum_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        return out
'''
    source = RELU.source.replace("return torch.relu(x)", "return x.sum()")  # a task: sum of all elements
    task = dataclasses.replace(RELU, source=rewrite_constants(source, {"batch_size": 2, "dim": 100}),
                               reference_solution=bad)
    run = check_task(task)
    assert run.ok, run.failures  # numerically right under the interpreter
    good = check_task(RELU)
    results = compile_launches([("bad", bad, run.launches), ("good", RELU.reference_solution, good.launches)], sm=90)
    assert results["good"] == []
    assert len(results["bad"]) == 1 and "row_sum_kernel" in results["bad"][0]
    assert "loop" in results["bad"][0].lower()


def test_dry_launches_record_full_sizes_without_running():
    matmul = builtin("matmul", "full")  # 4096 x 4096: nothing is allocated or computed
    launches = dry_launches(matmul, "bfloat16")
    assert len(launches) == 1
    sig = dict(launches[0].signature)
    assert sig["a_ptr"] == "*bf16" and sig["M"] == "i32"
    assert dict(launches[0].constexprs)["BLOCK_M"] == 128
