"""Issue 31's classes that only a GPU shows, end to end through the pool (skipped without CUDA):

- stream order: work on a side stream that waits for nothing (KernelBench's `non_default_stream_kernel`),
  or that the caller's stream waits for only at the end (a head start on the timer), is
  `cheat:unordered_stream`; a side stream ordered both ways is correct;
- CUDA graphs: a replay of the solution's own Triton launches counts as launching them; torch.mm captured
  in `__init__` and replayed is PyTorch compute; a graph replayed on stale inputs fails on values;
- fresh inputs for every timed call: a content cache never hits, so it is timed as the kernel it is;
- precision: a solution's own TF32 `tl.dot` is correct with `precision: tf32`, its speedup against the
  reference with TF32 allowed; a GEMM kept in PyTorch on half operands is flagged; a global switch left
  changed is flagged;
- the timer's window: what the measured time covers (the stream-order check on every timed call).

Run on a GPU machine:  python -m pytest -q -m gpu tests/test_verify_gpu_classes.py -p no:cacheprovider
"""

from __future__ import annotations

import pytest

from tritonrl_lib.core.config import VerifyConfig, gpu_available
from tritonrl_lib.verify import VerifierPool

from verifier_fixtures import candidate, task

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]

# (task, level, candidate, static check on)
CASES = {
    "side_unsynced": ("relu", 1, "relu_side_stream_unsynced", True),
    "side_synced": ("relu", 1, "relu_side_stream_synced_ok", True),
    "head_start": ("relu", 1, "relu_side_stream_head_start", True),
    "event_id_reuse": ("relu", 1, "relu_side_stream_event_id_reuse", True),
    "graph_ok": ("relu", 1, "relu_graph_replay_ok", True),
    "graph_stale": ("relu", 1, "relu_graph_stale", True),
    "graph_decoy": ("matmul", 1, "matmul_graph_torch_decoy", False),
    "content_cache": ("relu_large", 1, "relu_content_cache", False),
    "honest_large": ("relu_large", 1, "relu_ok", True),
    "tf32": ("gemm_bias_tanh", 1, "gemm_bias_tanh_tf32_gpu", True),
    "half_gemm": ("gemm_sum_scale", 2, "gemm_sum_scale_half_gemm", True),
    "honest_gemm": ("gemm_sum_scale", 2, "gemm_sum_scale_ok", True),
    "sdp_off": ("relu", 1, "relu_global_sdp_off", False),
    "float32_out": ("relu", 1, "relu_float32_output", True),
    "run_api": ("relu", 1, "relu_run_api_ok", True),
    "flash_headdim": ("attention_headdim", 1, "attention_headdim_flash_ok", True),
}


@pytest.fixture(scope="module")
def verdicts():
    out = {}
    with VerifierPool(VerifyConfig(timeout_s=180), device="cuda", cache=False, progress=False) as pool:
        for static in (True, False):
            names = [n for n, c in CASES.items() if c[3] == static]
            got = pool.map([task(CASES[n][0], level=CASES[n][1]) for n in names],
                           [candidate(CASES[n][2]) for n in names], static=static, progress=False)
            out.update(zip(names, got))
    return out


def ok(v) -> bool:
    return v.correct and not v.cheat_flags


def said(v) -> tuple:
    return v.reason, v.cheat_flags, v.error[:600], v.notes[-4:]


def test_work_not_ordered_with_the_callers_stream_is_a_verdict_of_its_own(verdicts):
    v = verdicts["side_unsynced"]
    assert not v.correct and v.reward == 0 and v.cheat_flags == ["unordered_stream"], said(v)
    assert "does not wait for the caller's stream" in v.error
    v = verdicts["side_synced"]
    assert ok(v) and v.stage == "timing", said(v)
    # a wait on a fresh event (never recorded) waits for nothing, whatever id a dropped event had
    v = verdicts["event_id_reuse"]
    assert not v.correct and v.cheat_flags == ["unordered_stream"], said(v)


def test_the_timer_gives_no_head_start_to_work_queued_off_its_stream(verdicts):
    # ordered with the caller's stream at the end only: its kernel could run during the timer's flush and
    # spin, before the start event, and leave the measured time
    v = verdicts["head_start"]
    assert not v.correct and v.cheat_flags == ["unordered_stream"] and v.speedup is None, said(v)


def test_a_replayed_graph_is_judged_like_a_plain_call(verdicts):
    v = verdicts["graph_ok"]  # its own launches, replayed: launched
    assert ok(v) and v.stage == "timing", said(v)
    v = verdicts["graph_stale"]  # replayed on the first call's inputs: wrong on values
    assert not v.correct and (v.reason.startswith("mismatch:") or "cached_output" in v.cheat_flags), said(v)
    v = verdicts["graph_decoy"]  # torch.mm captured in __init__: PyTorch compute when replayed
    assert not v.correct and any(f.startswith("pytorch_compute:aten.mm") for f in v.cheat_flags), said(v)


def test_a_content_cache_gets_no_timed_call_it_has_seen(verdicts):
    # every timed call's values are new: the cache never hits, so the kernel is timed as the kernel it is
    # (an honest ReLU kernel's speedup over torch.relu, about 1x), not as a dictionary lookup
    v, honest = verdicts["content_cache"], verdicts["honest_large"]
    assert ok(v) and v.stage == "timing" and ok(honest), (said(v), said(honest))
    assert v.speedup < 2.0 and v.speedup < 1.5 * honest.speedup, (v.speedup, honest.speedup)
    assert any("timed calls checked" in n for n in v.notes), v.notes


def test_a_tf32_solution_is_correct_and_paid_against_the_precision_matched_reference(verdicts):
    v = verdicts["tf32"]
    assert ok(v) and v.stage == "timing", said(v)
    assert any(n.startswith("precision: tf32") for n in v.notes), v.notes
    t = v.timing
    assert t["precision"] == "tf32" and "reference_fp32" in t and "speedup_fp32_reference" in t, t
    # the reward's speedup is the one against the reference with TF32 allowed
    assert v.speedup == t["speedup"] and v.ref_time_ms == t["reference"]["trimmed_mean_ms"]
    assert t["reference"]["trimmed_mean_ms"] <= t["reference_fp32"]["trimmed_mean_ms"] * 1.2


def test_precision_dtype_and_global_state_hold_on_a_gpu(verdicts):
    v = verdicts["half_gemm"]
    assert not v.correct and v.cheat_flags == ["heavy_op_dtype:gemm_float16"], said(v)
    assert ok(verdicts["honest_gemm"]), said(verdicts["honest_gemm"])
    v = verdicts["sdp_off"]
    assert not v.correct and v.cheat_flags == ["global_state:torch._get_flash_sdp_enabled"], said(v)
    v = verdicts["float32_out"]
    assert not v.correct and v.reason == "dtype_mismatch", said(v)


def test_legitimate_styles_stay_correct_on_a_gpu(verdicts):
    for name in ("run_api", "flash_headdim"):
        v = verdicts[name]
        assert ok(v) and v.stage == "timing", (name, said(v))
