"""The prescreen (verify.prescreen, worker/job.py): a large task's candidate runs on the tiny set alone
first, so one that fails there never waits for the task's full sizes. It may only reject: every verdict
is the one the full run gives, a candidate right on the tiny set is judged by the full run, and only
the candidate's own, repeatable failures end at the prescreen."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify import reasons as R
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox.limits import Budget
from tritonrl_lib.verify.worker.job import PRESCREEN_MIN_BYTES, prescreen_final, prescreen_wanted

CASES = Path(__file__).parent / "verifier_cases"
NOTE = "judged on the tiny input set alone"


def case(kind: str, name: str) -> str:
    return (CASES / kind / f"{name}.py").read_text()


def task(name: str, source: str | None = None) -> Task:
    return Task(id=f"test/{name}", level=1, name=name, source=source or case("tasks", name))


def _summary(v):
    """A verdict without its notes (the full run's say which larger sets it made) or what each pool's
    own seeds change (the values in its error)."""
    return (v.correct, v.stage, v.reason, v.reward, sorted(v.cheat_flags),
            [(e["name"], e["ok"], e.get("reason"), e["inputs"]) for e in v.errors])


def screened(v) -> bool:
    return bool(v.phases.get("prescreen")) and any(NOTE in n for n in v.notes)


# forward right on small inputs only: the tiny set passes, the task's own sizes do not
RIGHT_WHEN_SMALL = case("candidates", "relu_ok").replace("out = torch.empty_like(x)", "out = torch.zeros_like(x)") \
    .replace("n_elements = x.numel()", "n_elements = min(x.numel(), 1024)")
# never computes anything right: every set fails, the tiny one first
WRONG_EVERYWHERE = case("candidates", "relu_wrong_math")


@pytest.fixture(scope="module")
def verdicts():
    names = {"ok": case("candidates", "relu_ok"), "wrong_math": WRONG_EVERYWHERE,
             "import_error": case("candidates", "relu_import_error"),
             "raises": case("candidates", "relu_raises_forward"),
             "nan": case("candidates", "adv_nan_output"),
             "wrong_dtype": case("candidates", "relu_wrong_dtype"),
             "constant": case("candidates", "adv_constant_output"),
             "right_when_small": RIGHT_WHEN_SMALL,
             "hardcoded_shape": case("candidates", "relu_hardcoded_shape")}
    out = {}
    for mode in ("on", "off"):
        with VerifierPool(VerifyConfig(timeout_s=60, prescreen=mode, reference_cache_mb=0), workers=1,
                          device="cpu", cache=False, progress=False) as pool:
            got = pool.map(task("relu"), list(names.values()))
        out[mode] = dict(zip(names, got))
    return out


def test_every_verdict_is_the_full_runs(verdicts):
    for name, full in verdicts["off"].items():
        assert _summary(verdicts["on"][name]) == _summary(full), name
        assert not screened(full)


def test_failures_on_the_tiny_set_end_at_the_prescreen(verdicts):
    on = verdicts["on"]
    for name in ("import_error", "raises", "nan", "wrong_dtype"):
        v = on[name]
        assert not v.correct and screened(v), (name, v.reason, v.notes)
        assert R.side(v.reason) == "candidate"
    assert on["import_error"].reason == R.COMPILE_ERROR and on["raises"].reason == R.RUNTIME_ERROR
    assert on["nan"].reason == R.NAN_OUTPUT and on["wrong_dtype"].reason == R.DTYPE_MISMATCH
    # wrong values whose error no growth of the tiny set's atol could cover (the full run grows it with the
    # original outputs' magnitude, at most MAX_ATOL_GROWTH times) end there too
    for name in ("wrong_math", "constant"):
        v = on[name]
        assert not v.correct and screened(v) and v.reason == R.mismatch("tiny"), (name, v.reason)
        assert v.errors[0]["name"] == "tiny" and v.errors[0]["beyond_growth"] is True
    # and a full run says how much it grew the tiny set's atol, for the pool's later prescreens of the task
    assert 1.0 <= verdicts["off"]["ok"].phases["tiny_atol_growth"] < 2.0


SMALL_OUTPUTS = case("tasks", "relu").replace("return torch.relu(x)", "return torch.relu(x) * 1e-3")
ZEROS = case("candidates", "adv_constant_output")


def test_a_small_error_waits_for_the_growth_the_pool_learns_from_a_full_run():
    """Zeros for outputs ~1e-3: every value within atol, the whole output 100% off (the norm rule). At the
    largest atol growth the tiny set could get, zeros would pass that rule, so the first prescreen leaves
    them to the full run; the full run finds the tiny set's atol barely grows here (x1-2), the pool keeps
    that, and a later prescreen of the task holds the tiny set to it: the same verdict, without the task's
    full sizes."""
    assert SMALL_OUTPUTS != case("tasks", "relu")
    t = task("relu_small", SMALL_OUTPUTS)
    with VerifierPool(VerifyConfig(timeout_s=60, prescreen="on", reference_cache_mb=0), workers=1, device="cpu",
                      cache=False, progress=False) as pool:
        (first,) = pool.map(t, [ZEROS])
        (later,) = pool.map(t, [ZEROS.replace("Launches a kernel", "Launches a kernel too")])
    assert first.reason == later.reason == R.mismatch("tiny") and not first.correct and not later.correct
    assert not screened(first) and 1.0 <= first.phases["tiny_atol_growth"] < 2.0  # both sets draw randn
    assert screened(later) and later.errors[0]["beyond_growth"] is True
    assert "original" not in {e["name"] for e in later.errors}
    with VerifierPool(VerifyConfig(timeout_s=60, prescreen="off"), workers=1, device="cpu", cache=False,
                      progress=False) as pool:
        (full,) = pool.map(t, [ZEROS])
    assert _summary(full) == _summary(first) == _summary(later)


def test_a_prescreen_never_passes_a_candidate(verdicts):
    on = verdicts["on"]
    assert on["ok"].correct and not screened(on["ok"]) and on["ok"].phases.get("prescreen_passed") == 1.0
    # right on the tiny set, wrong at the task's sizes or on the larger set: the full run fails them
    for name in ("right_when_small", "hardcoded_shape"):
        v = on[name]
        assert not v.correct and not screened(v) and v.reason.startswith("mismatch:"), (name, v.reason)
        assert v.reason != R.mismatch("tiny")


NO_SIZE_CONSTANT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
"""


def test_a_task_no_constant_shrinks_is_judged_by_the_full_run():
    """Nothing to shrink: the prescreen only imports and builds, and the full run judges the values."""
    t = task("relu_literal", NO_SIZE_CONSTANT)
    with VerifierPool(VerifyConfig(timeout_s=60, prescreen="on"), workers=1, device="cpu", cache=False,
                      progress=False) as pool:
        ok, wrong, broken = pool.map(t, [case("candidates", "relu_ok"), WRONG_EVERYWHERE,
                                         case("candidates", "relu_import_error")])
    assert ok.correct and not screened(ok)
    assert not wrong.correct and not screened(wrong) and wrong.reason.startswith("mismatch:")
    assert broken.reason == R.COMPILE_ERROR and screened(broken)


def _budget(need_gib: float, exclusive: bool = False) -> Budget:
    return Budget(0.2, exclusive, 8192, 1 << 30, 1 << 30, 2.0, 120.0, True, need_bytes=int(need_gib * (1 << 30)))


def test_auto_prescreens_tasks_that_are_expensive_to_start():
    assert not prescreen_wanted("auto", _budget(0.1))
    assert prescreen_wanted("auto", _budget(PRESCREEN_MIN_BYTES / (1 << 30)))
    assert prescreen_wanted("auto", _budget(0.1, exclusive=True))
    assert prescreen_wanted("on", _budget(0.1)) and not prescreen_wanted("off", _budget(40, exclusive=True))


@pytest.mark.parametrize("reason,final", [
    (R.OK, False),  # passed the tiny set: the full run judges
    (R.COMPILE_ERROR, True), (R.RUNTIME_ERROR, True), (R.NAN_OUTPUT, True), (R.SHAPE_MISMATCH, True),
    (R.DTYPE_MISMATCH, True), (R.cheat(R.NO_TRITON_LAUNCH), True), (R.EXIT_CALLED, True),
    # values held to a standard the full run sets with the original outputs; faults the memory state decides
    (R.mismatch("tiny"), False), (R.CUDA_ERROR, False), (R.crash_signal("SIGSEGV"), False),
    (R.crash_signal("SIGABRT"), False),
    # not the candidate's doing, or not repeatable: the full run decides
    (R.OUT_OF_MEMORY, False), (R.TIMEOUT, False), (R.MEMORY_LIMIT, False), (R.crash_signal("SIGKILL"), False),
    (R.PROTOCOL_ERROR, False), (R.INTERNAL_ERROR, False), (R.REFERENCE_ERROR, False), (R.REFERENCE_TIMEOUT, False), (R.WORKER_LOST, False),
])
def test_which_prescreen_verdicts_are_final(reason, final):
    assert prescreen_final({"reason": reason, "correct": False}) is final
    assert prescreen_final({"reason": reason, "correct": True}) is False


def test_a_learnt_growth_is_held_with_a_margin():
    """References may differ between runs within 1e-3, so may the growth another full run learnt: a prescreen
    holds the tiny set to 5% more, and a full run reports its growth rounded up, never down."""
    from tritonrl_lib.verify.settings import JobSettings
    from tritonrl_lib.verify.worker.judge import GROWTH_MARGIN, Judge
    from tritonrl_lib.verify.worker.standard import MAX_ATOL_GROWTH

    settings = JobSettings.for_device(VerifyConfig(), "cpu").to_json()
    job = {"task_id": "t", "settings": settings, "policy": "strict", "prescreen": True}
    assert GROWTH_MARGIN > 1.0 and Judge({**job, "tiny_growth": 2.0}).tiny_bound == pytest.approx(2.0 * GROWTH_MARGIN)
    assert Judge({**job, "tiny_growth": MAX_ATOL_GROWTH}).tiny_bound == MAX_ATOL_GROWTH
    for unknown in (None, 0.5, float("nan"), "3"):  # none learnt (or nonsense): the largest there is
        assert Judge({**job, "tiny_growth": unknown}).tiny_bound == MAX_ATOL_GROWTH


def test_a_tiny_set_mismatch_beyond_any_growth_is_final():
    beyond = {"reason": R.mismatch("tiny"), "correct": False,
              "errors": [{"name": "tiny", "ok": False, "beyond_growth": True}]}
    assert prescreen_final(beyond) is True
    assert prescreen_final({**beyond, "errors": [{"name": "tiny", "ok": False}]}) is False
    assert prescreen_final({**beyond, "reason": R.CUDA_ERROR}) is False  # the memory state may decide those


@pytest.mark.parametrize("error", ["RuntimeError: CUDA out of memory. Tried to allocate 8.00 GiB",
                                   "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
                                   "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"])
def test_a_failure_of_the_shared_gpus_resources_goes_to_the_full_run(error):
    """The prescreen shares its GPU with other jobs where the full run may have it alone."""
    assert prescreen_final({"reason": R.RUNTIME_ERROR, "correct": False, "error": "Traceback\n" + error}) is False
    assert prescreen_final({"reason": R.RUNTIME_ERROR, "correct": False, "error": "ValueError: bad grid"}) is True


def test_an_honest_tf32_kernel_is_not_failed_by_the_prescreen():
    """A GEMM whose tl.dot runs in TF32 on float32 inputs is held to TF32's own error on the tiny set in the
    full run (the reference's heavy ops are float32): the prescreen holds it to the same, from the tiny
    set's own reference, and passes it on."""
    src = case("tasks", "gemm_bias_tanh").replace("torch.randn(batch_size, in_features) * 8",
                                                  "torch.randn(batch_size, in_features) * 64") \
        .replace("return torch.tanh(self.linear(x))", "return self.linear(x)")
    assert src != case("tasks", "gemm_bias_tanh")
    code = case("candidates", "gemm_bias_tanh_tf32_ok").replace("y = 2.0 * tl.sigmoid(2.0 * z) - 1.0", "y = z")
    assert code != case("candidates", "gemm_bias_tanh_tf32_ok")
    got = {}
    for mode in ("off", "on"):
        with VerifierPool(VerifyConfig(timeout_s=90, memory_limit_mb=3000, prescreen=mode, reference_cache_mb=0),
                          workers=1, device="cpu", cache=False, progress=False) as pool:
            got[mode] = pool.verify(task("gemm_bias_x64", src), code)
    assert got["off"].correct, (got["off"].reason, got["off"].error[-300:])
    assert got["on"].correct and not screened(got["on"]), (got["on"].reason, got["on"].error[-300:])
    assert got["on"].phases.get("prescreen_passed") == 1.0  # passed on its own, not only by the full run
