"""The fusion policy keeps the reference's GEMMs and convolutions in PyTorch, no more of them: counts by
family, references whose heavy work no census can count (attention, RNNs) leave no limit, and end to
end on the CPU: epilogue work written as one more GEMM or convolution is flagged, honest solutions pass."""

from __future__ import annotations


import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.candidate.heavy_ops import counts, excess, reference_counts
from tritonrl_lib.verify.candidate.op_recorder import OpRecorder
from tritonrl_lib.verify.pool import VerifierPool

from verifier_fixtures import candidate, task


def counted(fn, *args) -> dict:
    with OpRecorder() as recorder:
        fn(*args)
    return reference_counts(recorder.ops)


def test_the_reference_counter_counts_families_not_names():
    x = torch.randn(4, 8)
    assert counted(nn.Linear(8, 6), x) == {"gemm": 1}
    assert counted(lambda t: nn.Linear(8, 6)(t.view(2, 2, 8)), x) == {"gemm": 1}  # 3-D input: still one
    assert counted(lambda t: torch.relu(t @ t.t()) + 1, x) == {"gemm": 1}
    img = torch.randn(1, 3, 8, 8)
    assert counted(lambda t: F.avg_pool2d(nn.Conv2d(3, 4, 3)(t), 2), img) == {"conv": 1}
    assert counted(lambda t: nn.ConvTranspose2d(3, 2, 3)(t).sum(), img) == {"conv": 1}
    assert counted(torch.relu, x) == {}


def test_attention_and_rnns_leave_the_gemm_family_without_a_limit():
    q = torch.randn(1, 4, 8)
    # the CPU's attention decomposes into its two GEMMs, which are counted; a fused kernel (a GPU's flash
    # attention, an RNN layer) hides how many it makes
    assert counted(F.scaled_dot_product_attention, q, q, q) == {"gemm": 2}
    assert counted(nn.LSTM(8, 8, batch_first=True), q) == {"gemm": None}
    assert counted(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, q[None], q[None], q[None]) \
        == {"gemm": None}
    cand = {"aten.bmm.default": 2, "aten.mm.default": 1}
    assert excess(cand, {"gemm": None}) == []


def test_excess_compares_per_family():
    ops = {"aten.addmm.default": 1, "aten.mm.default": 1, "aten.convolution.default": 1, "aten.relu.default": 3}
    assert counts(ops) == {"gemm": 2, "conv": 1}
    assert excess(ops, {"gemm": 2, "conv": 1}) == []
    assert excess(ops, {"gemm": 1, "conv": 1}) == [("gemm", 2, 1, ["aten.addmm.default", "aten.mm.default"])]
    assert excess(ops, {"gemm": 2}) == [("conv", 1, 0, ["aten.convolution.default"])]
    assert excess(ops, None) == [] and excess(ops, {"gemm": "2"}) == []  # no (well-formed) counts: no limit
    # a convolution done as an im2col GEMM: as many heavy calls in all as the reference
    assert excess({"aten.im2col.default": 1, "aten.mm.default": 1}, {"conv": 1}) == []
    assert excess({"aten.mm.default": 2}, {"conv": 1}) == [("gemm", 2, 0, ["aten.mm.default"])]
    assert excess(ops, {"gemm": None, "conv": 0}) == []  # uncounted heavy work in the reference: no limit


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifyConfig(timeout_s=60, memory_limit_mb=2500), workers=1, device="cpu", cache=False,
                      progress=False) as p:
        yield p


@pytest.mark.parametrize("task_name,name,flag", [
    ("gemm_sum_scale", "gemm_sum_scale_via_mm", "pytorch_compute:more_gemm_calls"),
    ("conv_avgpool_relu", "conv_avgpool_as_conv", "pytorch_compute:more_conv_calls"),
])
def test_epilogue_work_as_more_heavy_ops_is_flagged(pool, task_name, name, flag):
    v = pool.verify(task(task_name, level=2), candidate(name))
    assert v.stage == "compile" and not v.correct and v.reward == 0.0, (v.reason, v.error[:300])
    assert v.cheat_flags == [flag] and "where the reference makes 1" in v.error, (v.cheat_flags, v.error)


@pytest.mark.parametrize("task_name,name", [
    ("gemm_sum_scale", "gemm_sum_scale_ok"),  # torch.mm where the reference has nn.Linear: one GEMM each
    ("attention_scale", "attention_scale_bmm_ok"),  # two bmm where the reference's attention is one op
    ("conv_bias_relu", "conv_bias_relu_ok"),
])
def test_honest_fusions_keep_their_heavy_ops(pool, task_name, name):
    v = pool.verify(task(task_name, level=2), candidate(name))
    assert v.correct and v.cheat_flags == [], (v.reason, v.error[:300])
