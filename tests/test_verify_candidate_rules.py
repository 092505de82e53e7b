"""Issue 31's rules end to end on the CPU, through the public pool with real candidates (the GPU-only ones
are in tests/test_verify_gpu_classes.py): launches through Triton's own `kernel.run`; tiny sizes that keep
tl.dot's minimum and the published divisibility; the output dtype equal to the reference's on every set;
heavy ops kept in PyTorch in the reference's precision; TF32 in a solution's own tl.dot held to TF32's own
error; global state changed by the candidate. Each candidate's docstring says what it does and the answer."""

from __future__ import annotations

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify import VerifierPool

from tritonrl_lib.tasks.task import Task
from verifier_fixtures import candidate, task

CONFIG = VerifyConfig(timeout_s=90, memory_limit_mb=3000)

# (task, level, candidate, static check on): everything runs in one batch, two workers side by side
CASES = {
    "run_api": ("relu", 1, "relu_run_api_ok", True),
    "flash_dim8": ("attention_headdim@head_dim = 8", 1, "attention_headdim_flash_ok", True),
    "flash_headdim": ("attention_headdim", 1, "attention_headdim_flash_ok", True),
    "unmasked16": ("row_double16", 1, "row_double16_unmasked_ok", True),
    "float32_out": ("relu", 1, "relu_float32_output", True),
    "half_gemm": ("gemm_sum_scale", 2, "gemm_sum_scale_half_gemm", True),
    "honest_gemm": ("gemm_sum_scale", 2, "gemm_sum_scale_ok", True),
    "tf32": ("gemm_bias_tanh", 1, "gemm_bias_tanh_tf32_ok", True),
    "rounded_ieee": ("gemm_bias_tanh", 1, "gemm_bias_tanh_rounded_ieee", True),
    "sdp_off": ("relu", 1, "relu_global_sdp_off", False),
    "mha_init": ("relu", 1, "relu_global_mha_init", False),
    "restored": ("relu", 1, "relu_global_restored", False),
}


def case_task(name: str, level: int) -> Task:
    """tests/verifier_cases/tasks/<name>.py, or with `@<constant> = <value>` that constant published so."""
    name, _, published = name.partition("@")
    t = task(name, level=level)
    if published:
        const = published.split("=")[0].strip()
        lines = [published if line.startswith(f"{const} =") else line for line in t.source.splitlines()]
        t = Task(id=f"{t.id}@{const}", level=level, name=t.name, source="\n".join(lines) + "\n")
    return t


@pytest.fixture(scope="module")
def verdicts():
    out = {}
    with VerifierPool(CONFIG, workers=2, device="cpu", cache=False, progress=False) as pool:
        for static in (True, False):
            names = [n for n, c in CASES.items() if c[3] == static]
            got = pool.map([case_task(CASES[n][0], CASES[n][1]) for n in names],
                           [candidate(CASES[n][2]) for n in names], static=static, progress=False)
            out.update(zip(names, got))
    return out


def ok(v) -> bool:
    return v.correct and v.stage == "full" and not v.cheat_flags


# ---------------------------------------------------------------- legitimate styles (item 4)


def test_a_launch_through_jitfunction_run_counts(verdicts):
    v = verdicts["run_api"]
    assert ok(v), (v.reason, v.error[:600])


def test_tiny_sizes_keep_what_a_kernel_for_the_published_task_may_require(verdicts):
    # a head dimension below 16 does not compile (tl.dot's minimum, checked for CUDA on the CPU too)
    v = verdicts["flash_headdim"]
    assert ok(v), (v.reason, v.error[:600])
    assert any("head_dim=16" in n for n in v.notes), v.notes
    # (that is what a head dimension of 8 does to this kernel, where a task publishes it)
    v = verdicts["flash_dim8"]
    assert v.reason == "compile_error" and v.stage == "static", (v.reason, v.error[:300])
    # and a dimension published as a multiple of 16 stays one
    v = verdicts["unmasked16"]
    assert ok(v), (v.reason, v.error[:600])
    assert any("features=16" in n for n in v.notes), v.notes


# ---------------------------------------------------------------- the output dtype (item 3)


def test_an_output_of_another_dtype_than_the_references_is_a_dtype_mismatch(verdicts):
    v = verdicts["float32_out"]
    assert not v.correct and v.reason == "dtype_mismatch" and not v.cheat_flags, (v.reason, v.error[:300])
    assert "dtype:float16" in v.error and "expected float16" in v.error
    assert v.stage == "tiny"  # right by value and dtype everywhere else


# ---------------------------------------------------------------- precision (item 5)


def test_a_heavy_op_kept_in_pytorch_runs_on_the_references_operand_dtypes(verdicts):
    v = verdicts["half_gemm"]
    assert not v.correct and v.reward == 0.0 and v.cheat_flags == ["heavy_op_dtype:gemm_float16"], \
        (v.reason, v.cheat_flags, v.error[:300])
    v = verdicts["honest_gemm"]  # the same GEMM in float32 (and in float16 on the half set, as the reference)
    assert ok(v), (v.reason, v.error[:600])


def test_tf32_in_a_solutions_own_dot_is_held_to_tf32s_own_error(verdicts):
    v = verdicts["tf32"]
    assert ok(v), (v.reason, v.error[:600])
    assert any(n.startswith("precision: tf32") for n in v.notes), v.notes
    ranged = next(e for e in v.errors if e["name"] == "range")
    # TF32's rounding through tanh there is beyond the float32 tolerance (atol grown with the outputs'
    # magnitude: hardly at all) and within TF32's own error
    assert ranged["max_abs"] > 0.02 and ranged.get("tf32_atol", 0) >= ranged["max_abs"], ranged
    # the same rounding in a kernel that says it computes in IEEE float32 is no TF32: a mismatch
    v = verdicts["rounded_ieee"]
    assert not v.correct and v.reason == "mismatch:range", (v.reason, v.error[:300])
    assert not any(n.startswith("precision: tf32") for n in v.notes)


# ---------------------------------------------------------------- global state (item 6)


def test_a_global_switch_left_changed_is_a_verdict_of_its_own(verdicts):
    v = verdicts["sdp_off"]
    assert not v.correct and v.cheat_flags == ["global_state:torch._get_flash_sdp_enabled"], \
        (v.reason, v.cheat_flags, v.error[:300])
    v = verdicts["mha_init"]
    assert not v.correct and v.cheat_flags == ["global_state:torch.mha_fastpath"], \
        (v.reason, v.cheat_flags, v.error[:300])
    v = verdicts["restored"]  # changed for its own work and put back before returning
    assert ok(v), (v.reason, v.error[:600])
