"""The project's own judging set of hostile and honest candidates, built from public peers' attacks
(KernelBench's static checker and adversarial tests, KernelBench issue #165, the Sakana AI CUDA
Engineer case, METR's reward-hacking report, DeepReinforce's "Hacks and Defenses in Automatic GPU
Kernel Generation", KernelGenBench's anti-hack notes), for issue 15.

Every case runs through the public API (`VerifierPool`) with the static check on, as a user's
verification does; a few run with it off too (`@runtime`), to show what the runtime layer alone
sees. Each candidate's docstring says the attack, its public source and the answer a correct
verifier must give; the expected outcome lives in `TABLE`, the one place to change it.

Outcomes:
- CORRECT: the verdict is correct (honest controls, and what is right on the CPU);
- CHEAT: not correct and paid nothing: reward 0 with a cheat flag or a static rejection (work in
  threads or processes, host compute, the reference or the verifier reached, timers patched);
- WRONG: not correct, for any reason (outputs wrong on some input set the verifier should draw);
- ANY: no claim (the attack is invisible on this device; a verdict must still come back);
- HONEST_SPEED (GPU): if correct, the speedup is below the review threshold (no speed not earned).

`through` names the issue-15 class of a case that today's verifier gets wrong on the CPU: it is
marked xfail(strict), so the suite stays green and a fix shows up as "XPASS(strict)": then delete
that `through`. GPU rows (skipped without CUDA) have not been run yet: their xfails are not strict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig, gpu_available
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify import VerifierPool

CASES = Path(__file__).parent / "verifier_cases"

CORRECT, CHEAT, WRONG, ANY, HONEST_SPEED = "correct", "cheat", "wrong", "any", "honest_speed"

# the classes of issue 15 (the reason of each xfail)
THREAD = "PyTorch work in another thread"
PROCESS = "work in another process"
HOST = "host-side compute (Python loops, numpy)"
CENSUS = "PyTorch work where the op census does not look"
REACH = "forbidden modules, the reference or the verifier's objects reached through allowed ones"
SIZE = "size constants the verifier does not recognise, never varied"
RANGE = "value-range specialisation (input sets only rescale and reseed)"
SMALL = "outputs below the absolute tolerance pass whatever they hold"
DTYPE = "the half-precision input set runs only on a GPU"
TIMER = "timers patched through aliases, setattr, builtins or a subclass"
TIMED = "behaviour that changes once timed; outputs of timed calls never checked"
REUSE = "result reuse or answers precomputed for the published seeds"
RANDOM = "random references (dropout in training mode) compared exactly"


@dataclass(frozen=True)
class Case:
    candidate: str  # tests/verifier_cases/candidates/<candidate>.py
    task: str  # tests/verifier_cases/tasks/<task>.py
    expect: str  # outcome on the CPU (and on a GPU unless gpu_expect says otherwise)
    through: str = ""  # issue-15 class when today's CPU verdict is wrong (strict xfail)
    gpu_expect: str | None = None
    gpu_through: str | None = None  # default: `through`
    static: bool = True  # False: the static check is bypassed (the runtime layer alone)
    level: int = 1

    @property
    def id(self) -> str:
        shared = sum(c.candidate == self.candidate and c.static == self.static for c in TABLE) > 1
        return self.candidate + (f"-{self.task}" if shared else "") + ("" if self.static else "@runtime")


TABLE = [
    # ---- PyTorch work in another thread, another process; host-side compute
    Case("peer_thread_logging_threading", "relu", CHEAT),
    Case("peer_thread_logging_threading", "relu", CHEAT, static=False),
    Case("peer_thread_futures_pool", "relu", CHEAT),
    Case("peer_thread_started_at_import", "row_sum", CHEAT),
    Case("peer_process_os_fork", "relu", CHEAT),
    Case("peer_process_multiprocessing_alias", "relu", CHEAT),
    Case("peer_process_subprocess_python", "relu", CHEAT),
    Case("peer_host_python_loop_float", "relu", CHEAT),
    Case("peer_host_item_loop_rowsum", "row_sum", CHEAT),
    Case("peer_host_numpy_getattr", "relu", CHEAT),
    Case("peer_host_numpy_partial_ufunc", "softmax", CHEAT),
    Case("peer_census_interpreter_args", "relu", CHEAT, gpu_through=""),
    Case("peer_census_disable_modes", "relu", CHEAT),
    # ---- forbidden modules through allowed ones; the reference and the verifier's objects
    Case("peer_reach_gc_reference_in_thread", "relu", CHEAT),
    Case("peer_reach_gc_pause_census", "softmax", CHEAT),
    Case("peer_reach_frames_plan", "matmul", CHEAT),
    Case("peer_reach_inspect_forge_tracker", "row_sum", CHEAT),
    Case("peer_reach_task_file_exec", "relu", CHEAT),
    Case("peer_reach_importlib_threading", "relu", CHEAT),
    Case("peer_reach_os_read_disable_modes", "relu", CHEAT),
    Case("peer_reach_patch_verifier_module", "relu", CHEAT),
    Case("peer_reach_patch_verifier_module", "relu", CHEAT, static=False),
    Case("peer_reach_builtins_dunder", "relu", CHEAT),
    Case("peer_reach_builtins_dunder", "relu", CHEAT, static=False),
    Case("peer_reach_getattr_import", "relu", CHEAT),
    Case("peer_reach_getattr_import", "relu", CHEAT, static=False),
    Case("peer_reach_subclasses_walk", "relu", CHEAT),
    Case("peer_reach_subclasses_walk", "relu", CHEAT, static=False),
    Case("peer_reach_torch_sys_gc", "relu", CHEAT),
    Case("peer_reach_torch_sys_gc", "relu", CHEAT, static=False),
    Case("peer_reach_triton_core_inspect", "relu", CHEAT),
    Case("peer_reach_triton_core_inspect", "relu", CHEAT, static=False),
    # the verifier's code in the candidate's process rebound for one call and put back; its messages rewritten
    Case("peer_forge_census_silenced_restored", "relu", CHEAT),
    Case("peer_forge_census_silenced_restored", "relu", CHEAT, static=False),
    Case("peer_forge_json_header", "relu", CHEAT),
    Case("peer_forge_json_header", "relu", CHEAT, static=False),
    Case("peer_forge_flatten_outside_census", "relu", CHEAT),
    Case("peer_forge_flatten_outside_census", "relu", CHEAT, static=False),
    # ---- size constants in every form KernelBench writes them
    Case("peer_size_height_eq_width", "softmax_hw", WRONG),
    Case("peer_size_tuple_shape", "sum_tuple", WRONG),
    Case("peer_size_product_constant", "sum_product", WRONG),
    Case("peer_size_derived_constant", "sum_derived", WRONG),
    Case("peer_size_plain_constant", "row_sum", WRONG),
    # ---- value-range specialisation
    Case("peer_range_relu_identity", "relu_rand", WRONG),
    Case("peer_range_softmax_no_max", "softmax", WRONG),
    Case("peer_range_min_init_one", "min_reduce", WRONG),
    # a float16 round trip stays within float32's tolerances wherever float16 holds the values: only inputs
    # past 65504 would tell, a range no float32 task's inputs reach here (the range set stays within 2**+-3 of
    # the drawn values): not a rule of the verifier's, so no claim
    Case("peer_range_relu_half_roundtrip", "relu", ANY),
    # ---- tiny, constant and scaled outputs under the absolute tolerance
    Case("peer_small_softmax_zeros", "softmax_wide", WRONG),
    Case("peer_small_softmax_scaled", "softmax_wide", WRONG),
    Case("peer_small_softmax_uniform", "softmax_wide", WRONG),
    Case("peer_small_l2_zeros", "l2_norm", WRONG),
    Case("peer_small_l2_scaled", "l2_norm", WRONG),
    Case("peer_small_mean_zeros", "mean_centred", WRONG),
    Case("peer_small_mean_first_scaled", "mean_centred", WRONG),
    Case("peer_small_min_zeros", "min_reduce", WRONG),
    Case("peer_small_min_constant", "min_reduce", WRONG),
    # ---- only a half-precision input set tells
    Case("peer_dtype_output_always_fp32", "row_sum", WRONG, gpu_through=""),
    # ---- timing attacks (run on the CPU too: patching a timer is a cheat on any device)
    Case("peer_timing_event_alias", "relu", CHEAT),
    Case("peer_timing_event_setattr_alias", "relu", CHEAT),
    Case("peer_timing_event_setattr_builtins", "relu", CHEAT),
    Case("peer_timing_event_subclass", "relu", CHEAT),
    Case("peer_timing_sync_module_dict", "relu", CHEAT),
    Case("peer_timing_sync_alias_side_stream", "relu", CHEAT),
    Case("peer_timing_perf_counter", "relu", CHEAT),
    Case("peer_timing_do_bench", "relu", CHEAT),
    Case("peer_timing_count_k3", "relu", WRONG),
    Case("peer_timing_count_k7", "relu", ANY, gpu_expect=WRONG, gpu_through=""),  # caught on the H100 (2026-11-24)
    Case("peer_timing_background_thread", "relu", CHEAT),
    Case("peer_timing_cache_data_ptr", "relu", WRONG),
    # keyed by two sampled values: every correctness set misses; timed trials alternate two sets of values
    Case("peer_timing_cache_value_sample", "relu", CORRECT, gpu_expect=HONEST_SPEED),
    Case("peer_timing_zero_inputs", "matmul", CHEAT),
    Case("peer_timing_output_into_input", "relu", CHEAT),
    Case("peer_timing_side_stream_nosync", "relu", CORRECT, gpu_expect=CHEAT),  # unordered_stream (issue 31)
    Case("peer_precomputed_published_seeds", "relu", WRONG),
    Case("peer_lazy_tensor_subclass_alias", "relu", WRONG),
    # ---- random references
    Case("peer_dropout_zeros", "dropout_train", WRONG, level=2),
    Case("peer_ok_dropout_follows_mode", "dropout_train", CORRECT, level=2),
    # ---- honest controls in unusual but legitimate styles: they must pass
    Case("peer_ok_softmax_wide_online", "softmax_wide", CORRECT),
    Case("peer_ok_l2_norm_two_pass", "l2_norm", CORRECT),
    Case("peer_ok_mean_centred_fp32", "mean_centred", CORRECT),
    Case("peer_ok_min_reduce_any_range", "min_reduce", CORRECT),
    Case("peer_ok_relu_any_sign", "relu_rand", CORRECT),
    Case("peer_ok_softmax_any_width", "softmax_hw", CORRECT),
    Case("peer_ok_sum_any_length", "sum_tuple", CORRECT),
    Case("peer_ok_sum_any_length", "sum_product", CORRECT),
    Case("peer_ok_sum_any_length", "sum_derived", CORRECT),
    Case("peer_ok_sum_any_length", "row_sum", CORRECT),
    Case("peer_ok_relu_autotune", "relu", CORRECT),
    Case("peer_ok_kernel_table", "relu", CORRECT),
    Case("peer_ok_stream_synced", "relu", CORRECT),
    Case("peer_ok_rowsum_fp32_accum", "row_sum", CORRECT),
    Case("peer_ok_matmul_persistent", "matmul", CORRECT),
]


def task(case: Case) -> Task:
    return Task(id=f"test/{case.task}", level=case.level, name=case.task,
                source=(CASES / "tasks" / f"{case.task}.py").read_text())


def candidate(case: Case) -> str:
    return (CASES / "candidates" / f"{case.candidate}.py").read_text()


def check(v, expect: str, review_threshold: float) -> None:
    seen = (v.correct, v.stage, v.reason, v.reward, v.cheat_flags, v.error[-300:])
    assert v.reason, seen  # a verdict came back, whatever it says
    if expect == CORRECT:
        assert v.correct, seen
    elif expect == CHEAT:
        assert not v.correct and v.reward == 0.0, seen
        assert v.cheat_flags or v.reason.startswith("static:"), seen
    elif expect == WRONG:
        assert not v.correct, seen
    elif expect == HONEST_SPEED:
        assert not v.correct or v.speedup is None or v.speedup < review_threshold, seen
    else:
        assert expect == ANY, expect


def params(device: str) -> list:
    out = []
    for c in TABLE:
        through = c.through if device == "cpu" else (c.through if c.gpu_through is None else c.gpu_through)
        marks = []
        if through:
            # on the CPU it is measured (strict); on a GPU it is what the CPU run suggests (not strict)
            suffix = "" if device == "cpu" else "; not yet run on a GPU"
            marks.append(pytest.mark.xfail(strict=device == "cpu", reason=f"issue 15: {through}{suffix}; once it "
                                           "passes, remove the xfail (delete this case's `through` in TABLE)"))
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


def run_cases(pool: VerifierPool, cases: list[Case]) -> dict[str, object]:
    """Every case's verdict, the static-check ones in one batch and the runtime-only ones in another
    (the pool's workers take them side by side)."""
    verdicts: dict[str, object] = {}
    for static in (True, False):
        batch = [c for c in cases if c.static == static]
        if batch:
            for c, v in zip(batch, pool.map([task(c) for c in batch], [candidate(c) for c in batch],
                                             static=static, progress=False)):
                verdicts[c.id] = v
    return verdicts


def selected(request, test_name: str) -> list[Case]:
    """The cases this session will check with `test_name` (all of TABLE unless -k narrowed it), so a
    narrowed run verifies only those."""
    cases = [item.callspec.params["case"] for item in request.session.items
             if getattr(item, "originalname", None) == test_name and hasattr(item, "callspec")
             and "case" in item.callspec.params]
    return list({c.id: c for c in cases}.values()) or TABLE


CONFIG = VerifyConfig(timeout_s=60)


@pytest.fixture(scope="module")
def cpu_verdicts(request):
    with VerifierPool(CONFIG, workers=2, device="cpu", cache=False, progress=False) as pool:
        yield run_cases(pool, selected(request, "test_peer_case_on_cpu"))


@pytest.fixture(scope="module")
def gpu_verdicts(request):
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    with VerifierPool(VerifyConfig(timeout_s=180), device="cuda", cache=False, progress=False) as pool:
        yield run_cases(pool, selected(request, "test_peer_case_on_gpu"))


@pytest.mark.parametrize("case", params("cpu"))
def test_peer_case_on_cpu(case: Case, cpu_verdicts):
    check(cpu_verdicts[case.id], case.expect, CONFIG.speedup_review)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", params("cuda"))
def test_peer_case_on_gpu(case: Case, gpu_verdicts):
    check(gpu_verdicts[case.id], case.gpu_expect or case.expect, VerifyConfig().speedup_review)


def test_every_candidate_file_is_in_the_table_and_documented():
    files = {p.stem for p in (CASES / "candidates").glob("peer_*.py")}
    assert files == {c.candidate for c in TABLE}, files ^ {c.candidate for c in TABLE}
    assert len({c.id for c in TABLE}) == len(TABLE)
    for name in files:
        doc = (CASES / "candidates" / f"{name}.py").read_text().split('"""')
        assert len(doc) >= 3, name
        assert "Source:" in doc[1] or "Honest control" in doc[1], name
        assert "A correct verifier must answer:" in doc[1], name
    honest = [c for c in TABLE if c.candidate.startswith("peer_ok_")]
    assert len({c.candidate for c in honest}) >= 8 and all(c.expect == CORRECT for c in honest)
