"""The verifier end to end on the CPU (Triton interpreter): correct solutions pass, wrong ones fail
at the right stage for the right reason, and one pool survives a batch of hostile candidates."""

from __future__ import annotations

import time

import pytest

from tritonrl_lib.core.config import VerifyConfig, gpu_available
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox.processes import descendants, proc_table

from verifier_fixtures import candidate, task


@pytest.fixture(scope="module")
def pool():
    # a short timeout for the hang case; a memory limit a blow-up reaches quickly
    # the CPU path (interpreter) even on a GPU machine; the GPU path has its own test at the end
    with VerifierPool(VerifyConfig(timeout_s=10, memory_limit_mb=2500), workers=2, device="cpu", cache=False,
                      progress=False) as p:
        yield p


def assert_no_leftovers(pool: VerifierPool, within_s: float = 5.0) -> None:
    """Every worker is idle with no process under it but the spare children it reported (none unless
    verify.prestart_child is on): everything a candidate started was killed. A verdict does not wait
    for its killed processes to finish exiting (processes.kill_tree), so they get `within_s` for that."""
    deadline = time.monotonic() + within_s
    for w in pool._slots:
        if w is None or w.proc.poll() is not None:
            continue
        while True:
            alive = [p.pid for p in descendants(w.proc.pid, proc_table()) if p.state != "Z"]
            if set(alive) <= set(w.spare_pids) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert set(alive) <= set(w.spare_pids), f"worker {w.proc.pid} still has {alive} under it (spares {w.spare_pids})"


# --------------------------------------------------------------------------- correct solutions


@pytest.mark.parametrize("name,level", [("relu", 1), ("row_sum", 1), ("matmul", 1), ("softmax", 1),
                                        ("conv_bias_relu", 2)])
def test_correct_solutions_pass(pool, name, level):
    v = pool.verify(task(name, level), f"Here is my kernel:\n```python\n{candidate(name + '_ok')}```\n")
    assert v.correct, (v.reason, v.error)
    assert (v.stage, v.reason, v.reward, v.cheat_flags) == ("full", "ok", 0.7, [])
    names = [e["name"] for e in v.errors]
    assert names[:3] == ["tiny", "original", "range"] and {"seed", "offset", "dtype:float16"} <= set(names)
    assert all(e["ok"] for e in v.errors)
    assert "timing skipped: no GPU" in v.notes
    assert any("float16 only on the CPU" in n for n in v.notes)  # the interpreter runs float16, not bfloat16


def test_weights_come_from_the_reference(pool):
    # the candidate builds its own randomly initialised conv and bias; only copying the
    # reference's state_dict (or the shared seed) makes them equal
    v = pool.verify(task("conv_bias_relu", 2), candidate("conv_bias_relu_ok").replace(
        "self.bias = nn.Parameter(torch.randn(bias_shape))", "self.bias = nn.Parameter(torch.zeros(bias_shape))"))
    assert v.correct, v.error


# --------------------------------------------------------------------------- wrong solutions


@pytest.mark.parametrize("task_name,cand,stage,reason,reward", [
    ("relu", "relu_wrong_math", "compile", "mismatch:tiny", 0.3),
    ("row_sum", "row_sum_wrong_shape", "compile", "shape_mismatch", 0.3),
    ("relu", "relu_wrong_dtype", "compile", "dtype_mismatch", 0.3),
    ("relu", "relu_syntax_error", "extract", "static:syntax_error", 0.0),
    ("relu", "relu_import_error", "static", "compile_error", 0.0),
    ("relu", "relu_raises_forward", "compile", "runtime_error", 0.3),
    ("relu", "relu_hardcoded_shape", "tiny", "mismatch:larger", 0.5),
    ("relu", "softmax_ok", "compile", "mismatch:tiny", 0.3),  # a right kernel for the wrong task
])
def test_wrong_solutions_fail_at_the_right_stage(pool, task_name, cand, stage, reason, reward):
    v = pool.verify(task(task_name), candidate(cand))
    assert (v.stage, v.reason, v.reward, v.correct) == (stage, reason, reward, False), v.error
    assert v.error


def test_errors_name_the_candidates_own_line(pool):
    v = pool.verify(task("relu"), candidate("relu_raises_forward"))
    assert "this solution gives up" in v.error and "tritonrl_candidate.py" in v.error


def test_no_code_and_broken_task_have_their_own_reasons(pool):
    v = pool.verify(task("relu"), "I could not write this kernel, sorry.")
    assert (v.stage, v.reward) == ("none", 0.0) and v.reason != "ok"
    bad_inputs = task("relu").source.replace("torch.randn(batch_size, dim)", "torch.randn(batch_size, dim, bogus=1)")
    broken = Task(id="broken", level=1, name="broken", source=bad_inputs)
    v = pool.verify(broken, candidate("relu_ok"))
    assert v.reason == "reference_error" and not v.correct and "bogus" in v.error


def test_fusion_policy_allows_the_conv_but_strict_does_not(pool):
    conv = task("conv_bias_relu", 2)
    assert pool.verify(conv, candidate("conv_bias_relu_ok")).correct
    strict = pool.verify(conv, candidate("conv_bias_relu_ok"), config=VerifyConfig(policy="strict", timeout_s=10))
    assert not strict.correct and strict.reward == 0.0
    # and with the static check out of the way, the runtime census says the same thing
    strict_rt = pool.verify(conv, candidate("conv_bias_relu_ok"), config=VerifyConfig(policy="strict", timeout_s=10),
                            static=False)
    assert strict_rt.reason.startswith("cheat:pytorch_compute:aten.convolution"), strict_rt.reason


def test_policy_extra_ops_reach_both_the_static_check_and_the_runtime_census(pool):
    """`verify.policy_extra_ops` lets fusion keep more ops in PyTorch, in the static check and in the
    op census alike; without it the same candidate is rejected by both layers."""
    relu2 = task("relu", 2)
    # PyTorch's abs after the Triton ReLU: right, but compute the policy leaves to Triton
    code = candidate("relu_ok").replace("return relu(x)", "return torch.abs(relu(x))")
    cfg = VerifyConfig(timeout_s=10)
    default = pool.verify(relu2, code, config=cfg)
    assert not default.correct and "pytorch_compute" in default.reason and "abs" in default.error, default.error
    runtime_only = pool.verify(relu2, code, config=cfg, static=False)
    assert not runtime_only.correct and "abs" in runtime_only.reason, runtime_only.reason
    extra = VerifyConfig(timeout_s=10, policy_extra_ops=["abs"])
    allowed = pool.verify(relu2, code, config=extra)
    assert allowed.correct, (allowed.reason, allowed.error)
    assert pool.verify(relu2, code, config=extra, static=False).correct


def test_half_input_sets_ask_for_the_references_dtype(pool):
    """A float32 task's float16 input set: the output's dtype is the reference's there (issue 31: a kernel
    that kept float32 outputs was compared by value and passed). One that reads its input right and writes
    the input's dtype passes, one that keeps float32 outputs is `dtype_mismatch`, one that refuses half
    inputs passes with a note, one that misreads them fails."""
    rows = task("row_sum")
    misreads = candidate("peer_dtype_output_always_fp32")
    reads_right = misreads.replace(".to(tl.pointer_type(tl.float32))", "")
    assert reads_right != misreads
    v = pool.verify(rows, reads_right)
    assert not v.correct and v.reason == "dtype_mismatch" and not v.cheat_flags, (v.reason, v.error)
    assert "dtype:float16" in v.error and "expected float16" in v.error
    in_dtype = reads_right.replace("dtype=torch.float32)", "dtype=x.dtype)")
    assert in_dtype != reads_right
    v = pool.verify(rows, in_dtype)
    assert v.correct, (v.reason, v.error)
    refuses = reads_right.replace("x = x.contiguous()", "assert x.dtype == torch.float32, 'float32 only'\n"
                                  "        x = x.contiguous()")
    v = pool.verify(rows, refuses)
    assert v.correct, (v.reason, v.error)
    assert any("dtype:float16 skipped" in n and "float32 only" in n for n in v.notes), v.notes
    v = pool.verify(rows, misreads)
    assert not v.correct and "dtype:float16 inputs" in v.error, (v.reason, v.error)


def test_a_tf32_matmul_passes_on_signed_scaled_inputs_too(pool):
    """The range set draws signs a rand()-input matmul never sees, so outputs cancel to near 0, where a
    TF32 product (emulated here: inputs rounded to 10 mantissa bits) misses rtol; the range set's atol
    follows the output's own scale, so an honest TF32 kernel passes while zeros still fail."""
    v = pool.verify(task("matmul_rand"), candidate("matmul_tf32_emulated"))
    assert v.correct, (v.reason, v.error)
    assert any(e["name"] == "range" and e["ok"] for e in v.errors), v.errors
    zeros = candidate("matmul_tf32_emulated").replace("return C.to(A.dtype)", "return (C * 0).to(A.dtype)")
    assert not pool.verify(task("matmul_rand"), zeros).correct


def test_a_bool_output_is_held_to_the_float32_reference_on_half_inputs_too(pool):
    """The float32 model on the half inputs is a second valid reference for any output dtype: a bool
    (or integer) output's copy must survive the float32 outputs' scrubbing (`.to()` of the same dtype
    returns the very tensor, which was then wiped: the honest kernel below failed or was flagged as a
    cached answer, depending on the seed)."""
    v = pool.verify(task("gt_threshold"), candidate("gt_threshold_fp32_ok"))
    assert v.correct, (v.reason, v.error)
    half = next(e for e in v.errors if e["name"] == "dtype:float16")
    assert half["ok"] and half.get("matched") == "float32-accumulated reference", half


def test_a_random_reference_with_batch_norm_runs_eval_mode_from_its_initial_state(pool):
    """Dropout makes the reference random, so both models run in eval mode, where batch norm reads its
    running statistics: the reference's training-mode runs (the tiny probe, the two repeat runs) had moved
    them away from the initial state the candidate is built from, failing an honest kernel (mismatch)."""
    v = pool.verify(task("gemm_bn_dropout", level=2), candidate("gemm_bn_dropout_ok"))
    assert v.correct, (v.reason, v.error)
    assert any("random reference" in n for n in v.notes), v.notes


# the honest max with its accumulator started at 0 instead of -inf
MAX_ZERO_INIT = ("max_over_dim_ok", 'tl.full((BLOCK_R,), float("-inf"), dtype=tl.float32)',
                 "tl.zeros((BLOCK_R,), dtype=tl.float32)")


@pytest.mark.parametrize("task_name,cand", [
    ("max_over_dim", MAX_ZERO_INIT),  # right on rand's positive rows, 0 on an all-negative one
    ("l2norm_wide", "l2norm_global_norm"),  # one norm for all rows: right while rows are drawn alike
])
def test_kernels_right_only_on_rows_drawn_alike_fail_the_seed_set(pool, task_name, cand):
    """The seed set negates its inputs and scales each row by its own power of two (found by red-teaming:
    both kernels passed every set before)."""
    if isinstance(cand, str):
        code = candidate(cand)
    else:  # (honest candidate, its line, the line made wrong)
        name, right, wrong = cand
        assert right in candidate(name)
        code = candidate(name).replace(right, wrong)
    v = pool.verify(task(task_name), code)
    assert (v.correct, v.reason) == (False, "mismatch:seed"), (v.reason, v.error[:300])
    assert any(n.startswith("variation seed: inputs negated, rows times 2**k") for n in v.notes), v.notes


def test_an_honest_max_passes_the_negated_seed_set(pool):
    v = pool.verify(task("max_over_dim"), candidate("max_over_dim_ok"))
    assert v.correct, (v.reason, v.error[:300])
    assert next(e for e in v.errors if e["name"] == "seed")["ok"]


# --------------------------------------------------------------------------- hostile candidates


# candidate -> (last stage passed, reason or reason prefix, a cheat flag that must be present)
ADVERSARIAL = {
    "adv_try_except_fallback": ("extract", "static:", None),
    "adv_pure_torch": ("extract", "static:", None),
    "adv_os_exit": ("extract", "static:", None),
    "adv_fork_flood": ("extract", "static:", None),
    "adv_fork_leftover": ("extract", "static:", None),
    "adv_memory_tree": ("extract", "static:", None),
    "adv_kill_worker": ("extract", "static:", None),
    "adv_foreign_kernel": ("extract", "static:", None),
    "adv_patch_allclose": ("extract", "static:", None),
    "adv_patch_reference": ("extract", "static:", None),
    "adv_compute_in_grid": ("extract", "static:", None),
    "adv_torch_compute_after_launch": ("compile", "cheat:pytorch_compute:", "pytorch_compute:aten.mul.Tensor"),
    "adv_cache_launches": ("tiny", "cheat:cached_output", "cached_output"),
    "adv_cache_by_shape": ("tiny", "cheat:", "cached_output"),
    "adv_constant_output": ("compile", "mismatch:tiny", None),
    "adv_writes_nothing": ("compile", "mismatch:tiny", None),
    "adv_mutates_input": ("compile", "cheat:input_mutated", "input_mutated"),
    "adv_raise_systemexit": ("compile", "exit_called", None),
    "adv_exit_builtin": ("compile", "exit_called", None),
    "adv_segfault_oob": ("compile", "crash_signal:SIGSEGV", None),
    "adv_infinite_loop": ("compile", "timeout", None),
    "adv_memory_blowup": ("compile", "out_of_memory", None),
    "adv_raise_init": ("static", "compile_error", None),
    "adv_nan_output": ("compile", "nan_output", None),
    "relu_hardcoded_shape": ("tiny", "mismatch:larger", None),
}


def _check(v, name: str, stage: str, reason, flag: str | None) -> None:
    got = (v.stage, v.reason, v.cheat_flags)
    assert v.stage == stage, (name, got, v.error[:500])
    reasons = reason if isinstance(reason, tuple) else (reason,)
    assert any(v.reason == r or (r.endswith(":") and v.reason.startswith(r)) for r in reasons), (name, got)
    if flag:
        assert flag in v.cheat_flags, (name, got)
    assert not v.correct and v.reward <= 0.5, (name, got)
    if v.cheat_flags or v.reason.startswith("static:"):
        assert v.reward == 0.0, (name, got)


def test_one_pool_survives_every_hostile_candidate(pool):
    names = list(ADVERSARIAL)
    relu = task("relu")
    verdicts = pool.map(relu, [candidate(n) for n in names] + [candidate("relu_ok")])
    assert len(verdicts) == len(names) + 1
    for name, v in zip(names, verdicts):
        _check(v, name, *ADVERSARIAL[name])
    assert verdicts[-1].correct  # and the pool still verifies a good solution at the end
    assert_no_leftovers(pool)


# with the static check bypassed, the runtime layer must still catch these on its own: first the guard in the
# candidate's process (guard.py) refuses what only an attack needs (here: new processes) ...
GUARDED = {"adv_fork_flood": ("compile", "cheat:process", "process"),
           "adv_fork_leftover": ("compile", "cheat:process", "process"),
           "adv_memory_tree": ("compile", "cheat:process", "process"),
           "adv_kill_worker": ("compile", "cheat:process", "process"),
           "adv_patch_allclose": ("compile", "cheat:monkeypatch:torch.allclose", "monkeypatch:torch.allclose")}
# ... and with the guard off too (TRITONRL_UNSAFE_NO_GUARD), the sandbox's own limits
RUNTIME_ONLY = {
    "adv_pure_torch": ("compile", "cheat:no_triton_launch", "pytorch_compute:aten.relu.default"),
    "adv_try_except_fallback": ("compile", "cheat:no_triton_launch", "no_triton_launch"),
    "adv_os_exit": ("compile", "process_exit", None),
    "adv_fork_flood": ("compile", "fork_flood", "fork_flood"),
    "adv_fork_leftover": ("full", "fork_flood", "fork_flood"),
    "adv_memory_tree": ("compile", "memory_limit", None),
    "adv_kill_worker": ("static", "worker_lost", None),
    "adv_foreign_kernel": ("compile", "cheat:foreign_kernel:", "foreign_kernel:some_library.library_relu"),
    "adv_patch_reference": ("compile", "mismatch:tiny", None),
    "adv_compute_in_grid": ("compile", "cheat:pytorch_compute:aten.relu.default", None),
}


def test_the_guard_catches_what_static_would(pool):
    names = list(GUARDED)
    verdicts = pool.map(task("relu"), [candidate(n) for n in names] + [candidate("relu_ok")], static=False,
                        config=VerifyConfig(timeout_s=90, memory_limit_mb=1500))
    for name, v in zip(names, verdicts):
        _check(v, name, *GUARDED[name])
    assert verdicts[-1].correct, verdicts[-1].error
    assert_no_leftovers(pool)


def test_the_sandbox_catches_what_static_and_the_guard_would(monkeypatch):
    monkeypatch.setenv("TRITONRL_UNSAFE_NO_GUARD", "1")
    names = list(RUNTIME_ONLY)
    # nothing here hangs: a long timeout lets the memory tree grow past the limit even on a slow machine
    cfg = VerifyConfig(timeout_s=90, memory_limit_mb=1500)
    with VerifierPool(workers=2, progress=False) as unguarded:
        verdicts = unguarded.map(task("relu"), [candidate(n) for n in names] + [candidate("relu_ok")], static=False,
                                 config=cfg)
        for name, v in zip(names, verdicts):
            _check(v, name, *RUNTIME_ONLY[name])
            assert "static check skipped" in v.notes or v.reason == "worker_lost"
        assert verdicts[-1].correct, verdicts[-1].error
        assert unguarded.restarts >= 1  # the killed worker was replaced
        assert_no_leftovers(unguarded)


def test_order_is_preserved_across_mixed_outcomes(pool):
    names = ["relu_ok", "relu_syntax_error", "relu_wrong_math", "relu_ok", "adv_segfault_oob", "relu_ok"]
    verdicts = pool.map([task("relu")] * len(names), [candidate(n) for n in names])
    assert [v.correct for v in verdicts] == [True, False, False, True, False, True]
    assert verdicts[4].reason == "crash_signal:SIGSEGV"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_path_times_and_checks():
    names = ["relu_ok", "adv_writes_nothing", "adv_mutates_input", "adv_segfault_oob", "adv_cache_launches",
             "relu_ok", "relu_wrong_in_half", "relu_ok"]
    with VerifierPool(VerifyConfig(timeout_s=180), workers=2, device="cuda", cache=False, progress=False) as pool:
        assert pool.device == "cuda"
        vs = pool.map(task("relu"), [candidate(n) for n in names])
    ok = vs[0]
    assert ok.correct and ok.stage == "timing" and ok.reason == "ok", (ok.reason, ok.error)
    assert ok.speedup and ok.speedup > 0 and 0.7 < ok.reward <= 1.0
    assert ok.timing["reference"]["trials"] == ok.timing["candidate"]["trials"] == 50
    assert any(e["name"].startswith("dtype:") and e["ok"] for e in ok.errors), ok.notes  # fp16 / bf16 ran
    assert vs[1].reason in ("nan_output", "mismatch:tiny") and not vs[1].correct  # poisoned, not stale
    assert "input_mutated" in vs[2].cheat_flags
    assert vs[3].reason == "cuda_error", (vs[3].reason, vs[3].error[-500:])
    assert "cached_output" in vs[4].cheat_flags
    assert vs[5].correct  # the worker that saw a CUDA error went on (a fresh child per candidate)
    # wrong only in the last full input set, which the worker compares while the candidate times:
    # a failed full stage, no timing in the verdict, and the GPU lock it held for timing is free again
    bad = vs[6]
    assert not bad.correct and bad.reason.startswith("mismatch:dtype:") and bad.stage == "tiny", (bad.reason, bad.stage)
    assert bad.speedup is None and not bad.timing and bad.reward < 0.7
    assert vs[7].correct and vs[7].stage == "timing" and vs[7].speedup
    # all but the first two ran on a worker that had run this task: the reference phase came from
    # its cache, and the hostile candidates are still caught there
    assert all(v.phases.get("reference_cached") for v in vs[2:]), [v.phases for v in vs]
    # and all but each worker's first ran in the spare child it had started meanwhile (CUDA context ready)
    assert sum(bool(v.phases.get("prestarted")) for v in vs) >= 3, [v.phases for v in vs]
    # Triton's C modules came from the worker (native_builds.py), checked, never built in a candidate
    assert not [n for v in vs for n in v.notes if "module here" in n], [v.notes for v in vs]
    assert isinstance(ok.timing.get("gpu_wait_s"), float)
