"""The KernelBench benchmark scripts (benchmarks/kernelbench_*.py): shrinking every form of size
constant a real checkout writes, sorting verdicts, and the sweep end to end on a small checkout the
test writes itself (the real layout, the project's own problem files) on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import kernelbench_common as kc  # noqa: E402
import kernelbench_sweep as sweep  # noqa: E402

# The forms KernelBench's files use for sizes: chained, arithmetic, tuple-unpacking, tuple-valued.
FORMS = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x, y):
        return self.conv(x) * self.scale, y.sum()

batch_size = 64
in_channels = 32
out_channels = 2048 * 2
height = width = 128
depth, extra = 96, 3
input_shape = (4096,)
kernel_size = 3
scale = 0.5
unused = 10000

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width), torch.rand(batch_size, depth, *input_shape)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
'''


def test_size_sites_finds_every_form():
    sites = {s.names: s.value for s in kc.size_sites(FORMS)}
    assert sites == {("batch_size",): 64, ("in_channels",): 32, ("out_channels",): 4096,
                     ("height", "width"): 128, ("depth",): 96, ("input_shape[0]",): 4096, ("kernel_size",): 3}
    # `extra` and `unused` are read by neither get_inputs nor get_init_inputs; floats are not sizes


def test_shrink_fits_the_budget_and_keeps_small_constants():
    small = kc.shrink(FORMS, budget=1 << 16)
    assert small.fits
    values = {s.names: s.value for s in kc.size_sites(small.source)}
    assert values[("batch_size",)] == kc.SMALL_BATCH
    assert values[("kernel_size",)] == 3  # at or below the floor: a kernel size stays
    assert values[("height", "width")] < 128 and values[("input_shape[0]",)] < 4096
    assert kc.footprint(small.source).elements <= 1 << 16
    assert "scale = 0.5" in small.source and "unused = 10000" in small.source  # nothing else changes


def test_footprint_on_meta_allocates_nothing_at_huge_sizes():
    huge = FORMS.replace("batch_size = 64", "batch_size = 1 << 20")
    fp = kc.footprint(huge)
    assert fp.inputs[0] == ((1 << 20, 32, 128, 128), "float32")
    assert fp.outputs == [(1 << 20, 4096, 126, 126), ()]


def test_reference_copy_renames_the_class_everywhere():
    copy = sweep.reference_copy(FORMS)
    assert "class ModelNew(nn.Module)" in copy and "super(ModelNew, self)" in copy
    assert "Model(" not in copy.replace("ModelNew(", "")


@pytest.mark.parametrize("reason,side", [
    ("ok", False), ("static:no_triton_kernel", False), ("cheat:no_triton_launch", False),
    ("mismatch:tiny", False), ("shape_mismatch", False), ("memory_limit", True), ("protocol_error", True),
    ("internal_error", True), ("reference_error", True), ("timeout", True), ("worker_lost", True),
    ("crash_signal:SIGKILL", True), ("runtime_error", True)])
def test_verifier_side_reasons(reason, side):
    assert kc.verifier_side(reason) is side


def test_gemm_only_flags_and_dropped_sets():
    assert kc.only_gemm_flags(["pytorch_compute:torch.nn.Linear"])
    assert kc.only_gemm_flags(["pytorch_compute:aten.addmm.default", "pytorch_compute:aten.mm.default"])
    assert not kc.only_gemm_flags(["pytorch_compute:aten.addmm.default", "pytorch_compute:aten.relu.default"])
    assert not kc.only_gemm_flags([])
    notes = ["tiny: shrunk batch_size=2",
             "variation larger skipped: the reference failed on it (OSError: [Errno 27] File too large)"]
    assert kc.dropped_sets(notes) == ["larger (OSError: [Errno 27] File too large)"]


def test_error_cause_is_the_exception_a_traceback_ends_in():
    text = ("message 'internal_error' before the reference was done\nTraceback (most recent call last):\n"
            '  File "x.py", line 3, in f\n    os.ftruncate(fd, n)\nOSError: [Errno 27] File too large\n')
    assert kc.error_cause(text) == "OSError: [Errno 27] File too large"
    assert kc.error_cause("resident memory 8807 MiB over the limit of 8192 MiB") == \
        "resident memory 8807 MiB over the limit of 8192 MiB"
    assert kc.error_cause("torch.OutOfMemoryError: CUDA out of memory.").startswith("OutOfMemoryError: CUDA")


# --------------------------------------------------------------------------- the sweep, end to end

RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """ReLU of a batch of rows."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 3000

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''

ROW_SUM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Sum over the last dimension."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1)

batch_size = 8
dim = 500

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_sweep_end_to_end_on_the_cpu(tmp_path):
    """Reference copies (static on and off), the small-output kernel and an honest solution on a
    two-problem checkout: every verdict as expected, no verifier error, a resumed run does nothing."""
    level1 = tmp_path / "kb" / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "19_ReLU.py").write_text(RELU)  # the name of a problem the project has a solution for
    (level1 / "5_RowSum.py").write_text(ROW_SUM)
    out = tmp_path / "out"
    # a process of its own, as it is run: the in-process pair needs TRITON_INTERPRET set before
    # triton is first imported, which other tests in this process may already have done
    cmd = [sys.executable, str(BENCH / "kernelbench_sweep.py"), "--kernelbench", str(tmp_path / "kb"),
           "--out", str(out), "--device", "cpu", "--small", "--levels", "1", "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    recs = [json.loads(x) for part in ("refcopy", "small_output", "honest")
            for x in (out / f"{part}.jsonl").read_text().splitlines()]
    by = {(r["part"], r["variant"], r["problem"]): r for r in recs}
    assert len(recs) == 2 + 2 + 1 + 1  # row sum's output is not its input's shape: no small-output case
    assert all(r["outcome"] == "expected" for r in recs), [(k, r["reason"]) for k, r in by.items()]
    assert by[("refcopy", "runtime", "19_ReLU")]["reason"] == "cheat:no_triton_launch"
    assert by[("small_output", "tiny", "19_ReLU")]["reason"].startswith("mismatch:")
    honest = by[("honest", "honest", "19_ReLU")]
    assert honest["correct"] and honest["do_bench"]["agree"] is True
    text = (out / "summary.md").read_text()
    assert "**Verifier errors: 0**" in text and "| 1 | 19_ReLU | elementwise | correct |" in text

    runs = (out / "runs.jsonl").read_text()
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "runs.jsonl").read_text() == runs  # resumed: everything was done, nothing ran again
