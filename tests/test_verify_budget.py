"""Per-job budgets from a task's measured footprint (limits.Budget.for_task), on machines of the
sizes the project runs on: KernelBench's published sizes on one 80 GB GPU and a 128 GiB host, and on an
H200 shared by 4 and 12 workers; and the budget rule itself: every input set's real draw, measured on the
CPU and extrapolated, within the footprint's estimate."""

from __future__ import annotations

import dataclasses
import tempfile

import pytest
import torch

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify import reasons as R
from tritonrl_lib.verify.candidate.input_sets import drawer
from tritonrl_lib.verify.candidate.variations import (VARIATION_ORDER, cast_floats, larger_plan, load_task_module,
                                                      value_transforms)
from tritonrl_lib.verify.sandbox.footprint import Footprint, live_bytes_class, measure
from tritonrl_lib.verify.sandbox.limits import GIB, Budget, memory_need
from tritonrl_lib.verify.settings import JobSettings

SETTINGS = JobSettings.for_device(VerifyConfig(), "cuda")
GPU, HOST = 80 * GIB, 128 * GIB


def fp(inputs_gib: float, outputs_gib: float, params_gib: float = 0.0, work_gib: float = 0.0) -> Footprint:
    out = int(outputs_gib * GIB)
    return Footprint(int(inputs_gib * GIB), int(params_gib * GIB), out, int(work_gib * GIB), out)


def test_a_small_task_shares_the_gpu_under_the_configured_limits():
    b = Budget.for_task(fp(0.01, 0.01), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert not b.exclusive and not b.too_large
    assert b.memory_limit_mb == SETTINGS.memory_limit_mb
    assert 0 < b.gpu_fraction <= 0.9 / 4 + 1e-9
    assert b.larger_factor >= 2.0


def test_a_large_task_runs_alone_with_room_for_its_data():
    # L1/39 L2Norm at its published size: 8 GiB in, 8 GiB out
    b = Budget.for_task(fp(8, 8), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert b.exclusive and not b.too_large
    assert b.gpu_fraction > 0.5  # the GPU to itself
    assert b.memory_limit_mb > 16 * 1024  # its outputs travel through the candidate's memory
    assert b.file_size_bytes >= 2 * 8 * GIB
    # the worker may hold only part of the host in references: fewer sets than the seven a small task gets
    assert 2 * 8 * GIB <= b.reference_bytes <= 0.4 * HOST


def test_a_task_too_large_for_one_share_takes_as_many_as_it_needs():
    # a Level-2 convolution's size: 2 GiB in, 1 GiB out, 6 GiB of intermediates, on an H100 at 12 workers
    share = 0.9 * GPU / 12
    # on a host with memory to spare, as few shares as hold its device memory
    roomy = Budget.for_task(fp(2, 1, work_gib=6), SETTINGS, "cuda", GPU, 2000 * GIB, sharers=12)
    assert roomy.exclusive and 1 < roomy.shares < 12  # more than its own share, less than the GPU
    assert roomy.need_bytes + GIB <= roomy.shares * share < roomy.need_bytes + GIB + share
    assert roomy.gpu_fraction == pytest.approx(0.9 * roomy.shares / 12)
    # on a 128 GiB host more, for its reference outputs (its shares' part of the host's 40%), still fewer than all
    b = Budget.for_task(fp(2, 1, work_gib=6), SETTINGS, "cuda", GPU, HOST, sharers=12)
    assert roomy.shares <= b.shares < 12 and b.gpu_fraction == pytest.approx(0.9 * b.shares / 12)
    assert b.reference_bytes == pytest.approx(0.4 * HOST * b.shares / 12 - 2 * b.larger_growth * GIB, rel=1e-6)
    alone = Budget.for_task(fp(2, 1, work_gib=6), SETTINGS, "cuda", GPU, HOST, sharers=1)
    assert (b.skip_sets, b.larger_factor, b.timed_checks) == (alone.skip_sets, alone.larger_factor,
                                                            alone.timed_checks)  # the same sets as alone


def _sets_sent(b: Budget, out: int, half: bool, tiny_shrinks: bool) -> list[str]:
    """The input sets whose reference outputs a reference phase under `b` sends, in its order (tiny,
    original, the variations, the timed checks), each admitted by the real ReferencePhase.room_for."""
    import types

    from tritonrl_lib.verify.candidate.reference_phase import ReferencePhase

    phase = object.__new__(ReferencePhase)
    phase.budget, phase.child = b, types.SimpleNamespace(note=lambda text: None)
    copies = 2 if half else 1  # a half-precision set's float32-accumulated alternative travels too
    phase.sent_bytes = (int(0.001 * out) if tiny_shrinks else out) * copies + out * copies  # tiny, original
    phase.original_out_bytes = out
    sent = []
    for name in VARIATION_ORDER[1:SETTINGS.num_variations]:
        if name != "range" and not phase.room_for(name):
            continue
        sent.append(name)
        grown = (b.larger_growth or b.larger_factor) if name == "larger" else 1.0
        phase.sent_bytes += (2 * out if half else out) if name == "dtype" else int(grown * out * copies)
    for k in range(b.timed_checks):
        if not phase.room_for("timed"):
            break
        sent.append(f"timed:{k}")
        phase.sent_bytes += out * copies
    return sent


def test_a_job_in_several_shares_sends_every_set_the_gpu_alone_would():
    # the host room of a job's shares must hold what the GPU alone would send: half-precision outputs (sent
    # twice), a tiny set left at the task's sizes, every variation and timed check, over a grid of sizes
    checked = 0
    for out_mib in range(256, 4096, 160):
        for work_gib in (2, 6, 16):
            for in_gib in (0.5, 2):
                f = fp(in_gib, out_mib / 1024, work_gib=work_gib)
                b = Budget.for_task(f, SETTINGS, "cuda", GPU, HOST, sharers=12)
                if b.too_large or not b.exclusive or b.shares >= 12:
                    continue
                alone = dataclasses.replace(b, reference_bytes=Budget.for_task(f, SETTINGS, "cuda", GPU, HOST,
                                                                               sharers=1).reference_bytes)
                for half in (False, True):
                    for tiny_shrinks in (False, True):
                        out = f.output_bytes
                        assert _sets_sent(b, out, half, tiny_shrinks) == _sets_sent(alone, out, half, tiny_shrinks), \
                            (out_mib, work_gib, in_gib, half, tiny_shrinks, b.shares)
                        checked += 1
    assert checked >= 40  # the grid does reach jobs of several shares


def test_a_task_whose_references_fill_the_host_takes_the_gpu_alone():
    # 6 GiB out: alone it may hold 0.4 x 128 GiB of reference outputs and leaves later sets out; fewer
    # shares would leave out more, so it keeps the GPU (and its host room) to itself, as before shares
    b = Budget.for_task(fp(6, 6), SETTINGS, "cuda", GPU, HOST, sharers=12)
    assert b.exclusive and b.shares == 12 and b.gpu_fraction == pytest.approx(0.9)
    assert b.reference_bytes == int(0.4 * HOST - 2 * 6 * GIB * b.larger_growth)
    # on a host with memory to spare the same task needs fewer shares: only the GPU's memory counts
    big_host = Budget.for_task(fp(6, 6), SETTINGS, "cuda", GPU, 2000 * GIB, sharers=12)
    assert big_host.shares < 12 and big_host.need_bytes + GIB <= big_host.shares * 0.9 * GPU / 12


def test_a_task_that_cannot_fit_says_so_with_its_sizes():
    b = Budget.for_task(fp(60, 40), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert b.too_large and "GiB" in b.too_large and "80.0 GiB" in b.too_large


def test_unknown_footprint_keeps_the_configured_limits():
    b = Budget.for_task(None, SETTINGS, "cuda", GPU, HOST, sharers=2)
    assert not b.exclusive and b.memory_limit_mb == SETTINGS.memory_limit_mb and b.reference_bytes == 0


def test_the_reference_cache_takes_a_task_whose_record_fits_a_quarter_of_it():
    # ReLU at RL's training sizes (KernelBench's 4096 x 8192 float32 with the batch / 4): 32 MiB in,
    # 32 MiB out, about 0.5 GiB over its input sets; the published sizes' 4x that
    training = Budget.for_task(fp(1 / 32, 1 / 32), SETTINGS, "cuda", GPU, HOST, sharers=12)
    published = Budget.for_task(fp(1 / 8, 1 / 8), SETTINGS, "cuda", GPU, HOST, sharers=12)
    assert training.cacheable_inputs and not published.cacheable_inputs
    small_cache = JobSettings.for_device(VerifyConfig(reference_cache_mb=1024), "cuda")
    assert not Budget.for_task(fp(1 / 32, 1 / 32), small_cache, "cuda", GPU, HOST, sharers=12).cacheable_inputs
    off = JobSettings.for_device(VerifyConfig(reference_cache_mb=0), "cuda")
    assert not Budget.for_task(fp(0.001, 0.001), off, "cuda", GPU, HOST, sharers=12).cacheable_inputs


# --------------------------------------------------------------------------- every input set's draw, counted


SETS = ("tiny", *VARIATION_ORDER, "timed:0")  # every input set a job draws (timed:<k>: the timing's checked calls)
SEED = 1234

_HEAD = "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, *xs):\n        return xs[0] * 2\n"
# tasks whose get_inputs() draws in each form the drawing code treats differently, `{n}` their size knob
# (elements grow linearly with it): one input; two with get_inputs' own temporaries (KernelBench's
# HuberLoss); a symmetric and a triangular matrix (keep_structure's masks and copies); half precision (the
# range set's float32 chunk copy); a float and an integer input; a 4-D input
DRAW_TASKS = {
    "one": "batch_size = 4\ndim = {n}\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n",
    "scaled_pair": "batch_size = 4\ndim = {n}\ndef get_inputs():\n    scale = torch.rand(())\n"
                   "    return [torch.rand(batch_size, dim) * scale, torch.rand(batch_size, dim)]\n",
    "structured": "N = 64\nreps = {n}\ndef get_inputs():\n    a = torch.randn(reps, N, N)\n"
                  "    return [(a + a.mT) / 2, torch.tril(torch.randn(reps, N, N))]\n",
    "half": "batch_size = 4\ndim = {n}\ndef get_inputs():\n    return [torch.randn(batch_size, dim, dtype=torch.float16)]\n",
    "with_ints": "batch_size = 4\ndim = {n}\ndef get_inputs():\n"
                 "    return [torch.randn(batch_size, dim), torch.randint(0, 10, (batch_size, dim))]\n",
    "image": "batch_size = 2\nchannels = 3\nheight = {n}\nwidth = 32\ndef get_inputs():\n"
             "    return [torch.randn(batch_size, channels, height, width)]\n",
}


def _source(task: str, n: int) -> str:
    return _HEAD + DRAW_TASKS[task].format(n=n) + "def get_init_inputs():\n    return []\n"


def drawn_peak(source: str, name: str, factor: float = 2.0) -> int:
    """The bytes alive at the peak of drawing input set `name` for real, on the CPU, the way the reference
    phase draws it (every form it may try), measured by the footprint's own live-bytes mode."""
    LiveBytes = live_bytes_class()
    with tempfile.TemporaryDirectory() as folder:
        base = load_task_module(source, folder, "tritonrl_budget_task")
        if name in ("tiny", "original") or name.startswith("timed:"):
            forms = [drawer(base.get_inputs, SEED, "cpu")]
        elif name in ("range", "seed", "offset"):
            forms = [drawer(base.get_inputs, SEED, "cpu", t) for t, _ in value_transforms(name, SEED)]
        elif name == "dtype":
            forms = [drawer(base.get_inputs, SEED, "cpu", lambda xs, d=d: cast_floats(xs, d))
                     for d in (torch.float16, torch.bfloat16)]
        elif name == "larger":
            const, value = larger_plan(source, factor)
            module = load_task_module(source, folder, "tritonrl_budget_larger", {const: value})
            forms = [drawer(module.get_inputs, SEED, "cpu")]
        else:
            pytest.fail(f"input set {name!r} has no drawer in this test: add it here, and what its draw holds "
                        "to Footprint.draw_peak (sandbox/footprint.py)")
        peak = 0
        for make in forms:
            mode = LiveBytes()
            with mode:
                values = make()
            del values
            peak = max(peak, mode.peak)
        return peak


@pytest.mark.parametrize("task", sorted(DRAW_TASKS))
def test_the_footprint_counts_what_every_input_set_really_draws(task):
    # measured on the CPU at two small sizes and extrapolated linearly to a size 16 times the larger (every
    # draw is linear in the elements up to the thresholds the model knows: keep_structure's 2**27 elements,
    # the range set's 2**26-element chunks); the model's estimate, from the meta device's footprint at
    # that size, covers it for every input set, the other size at its largest factor included
    small, larger = 256, 1024
    big = 16 * larger
    fp_big = measure(_source(task, big))
    for name in SETS:
        a, b = drawn_peak(_source(task, small), name), drawn_peak(_source(task, larger), name)
        assert b > 0, name
        expected = b + (b - a) * (big - larger) / (larger - small)
        estimate = fp_big.draw_peak(name, 2.0)
        assert estimate >= expected, (task, name, estimate, expected)
        # and at the small size itself, from that size's own footprint
        assert measure(_source(task, small)).draw_peak(name, 2.0) >= a, (task, name)


# KernelBench's newer published sizes (its L1 47_Sum, 96_HuberLoss and L2 56_Matmul_Sigmoid_Sum), measured on
# the meta device as a worker measures them: nothing is allocated
SUM_8GIB = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)
batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1
def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]
def get_init_inputs():
    return [reduce_dim]
"""
HUBER_8GIB = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)
batch_size = 32768
input_shape = (32768,)
def get_inputs():
    scale = torch.rand(())
    return [torch.rand(batch_size, *input_shape) * scale, torch.rand(batch_size, *input_shape)]
def get_init_inputs():
    return []
"""
GEMM_4GIB_WEIGHT = """import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)
    def forward(self, x):
        return torch.sum(torch.sigmoid(self.linear(x)), dim=1, keepdim=True)
batch_size = 128
input_size = 32768
hidden_size = 32768
def get_inputs():
    return [torch.rand(batch_size, input_size)]
def get_init_inputs():
    return [input_size, hidden_size]
"""
H200 = int(139.8 * GIB)  # what torch reports of an H200: 0.9 x it / 4 workers = the 31.46 GiB the issue names


def test_kernelbench_published_sizes_take_more_shares_where_one_would_run_out():
    # issue 31: with 4 workers on one H200 (31.46 GiB each) L1 47_Sum ran out drawing its range set, and
    # 96_HuberLoss in its timing; with 12 (10.49 GiB each) L2 56_Matmul_Sigmoid_Sum in its worker
    sum8, huber, gemm = measure(SUM_8GIB), measure(HUBER_8GIB), measure(GEMM_4GIB_WEIGHT)
    assert sum8.input_bytes == 128 * 4096 * 4095 * 4 and sum8.drawn >= sum8.input_bytes
    assert huber.work_bytes + huber.output_bytes >= 4 * GIB  # the fused loss's elementwise temporary (no dispatch shows it)
    assert gemm.param_bytes >= 4 * GIB and gemm.heavy_float32
    for fp_, sharers in ((sum8, 4), (sum8, 12), (huber, 12), (gemm, 12)):
        b = Budget.for_task(fp_, SETTINGS, "cuda", H200, 2000 * GIB, sharers)
        share = 0.9 * H200 / sharers
        assert not b.too_large and b.exclusive and 1 < b.shares <= sharers, (fp_, sharers)
        assert b.need_bytes > share - GIB  # it would not have fit one share: the reason it takes more
        assert b.need_bytes <= b.shares * share - GIB  # and its shares hold it
        assert b.gpu_fraction == pytest.approx(0.9 * b.shares / sharers) and not b.skip_sets
    # the 8 GiB input's draws, as the candidate phase holds them: the range set's inputs beside the same set
    # drawn again (the inputs-unchanged check) pass a 31.46 GiB share once fragmentation is counted
    assert sum8.input_bytes + sum8.draw_peak("range") + sum8.largest_block > 0.9 * H200 / 4 - GIB
    # HuberLoss with 4 workers: where it shares, its whole peak fits the share (the last set's inputs are no
    # longer held beside the next set's draw, the timing draws one set of inputs, not three)
    b = Budget.for_task(huber, SETTINGS, "cuda", H200, 2000 * GIB, 4)
    assert b.exclusive or b.need_bytes <= 0.9 * H200 / 4 - GIB
    # a 4 GiB weight shares a GPU with 3 others: the models, the dtype set's half copies, the TF32 run fit
    b = Budget.for_task(gemm, SETTINGS, "cuda", H200, 2000 * GIB, 4)
    assert not b.exclusive and not b.skip_sets and b.need_bytes < 0.9 * H200 / 4 - GIB
    # a small task shares a GPU 12 ways with every set
    b = Budget.for_task(measure(_source("one", 1024)), SETTINGS, "cuda", H200, 2000 * GIB, 12)
    assert not b.exclusive and not b.skip_sets and b.timed_checks == 4


def test_memory_need_counts_each_set_and_phase():
    fp_ = measure(GEMM_4GIB_WEIGHT)
    every = memory_need(fp_, VARIATION_ORDER, 2.0, 4, timing=True)
    # the dtype set's half models (the reference's and the candidate's) and its float32 reference
    assert memory_need(fp_, tuple(n for n in VARIATION_ORDER if n != "dtype"), 2.0, 4, timing=True) < every
    sum8 = measure(SUM_8GIB)
    # the other size drawn at twice the inputs, beside the inputs-unchanged check's second draw
    assert memory_need(sum8, VARIATION_ORDER, 2.0, 4, True) >= 4 * sum8.input_bytes
    assert memory_need(sum8, VARIATION_ORDER, 0.5, 4, True) < memory_need(sum8, VARIATION_ORDER, 2.0, 4, True)


def test_a_task_too_large_even_alone_leaves_sets_out_up_front_or_says_so():
    # 12 GiB in and out on an 80 GB GPU: alone, with a smaller other size and one timed call checked
    b = Budget.for_task(fp(12, 12), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert not b.too_large and b.exclusive and not b.skip_sets and b.larger_factor < 1 and b.timed_checks == 1
    # 16 GiB: alone, without the other size (and the dtype set)
    b = Budget.for_task(fp(16, 16), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert not b.too_large and b.exclusive and set(b.skip_sets) >= {"larger"} and "left out" in b.note
    assert b.need_bytes <= 0.9 * GPU - GIB
    # and what cannot fit at all says so before anything runs, naming the machine as the limit
    b = Budget.for_task(fp(30, 30), SETTINGS, "cuda", GPU, HOST, sharers=4)
    assert b.too_large and R.side(R.TASK_TOO_LARGE) == "verifier"
