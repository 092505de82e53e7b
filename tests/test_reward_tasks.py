"""RL's training rewards: the tasks at training sizes (rl.train_task_scale) and the verifier settings
of training (VerifyConfig.for_training). The verdict's rules must not loosen: a reference solution
stays correct on its scaled task, a wrong kernel stays wrong, and evaluation's settings stay as set."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tritonrl_lib.core.config import ConfigError, VerifyConfig, load_config
from tritonrl_lib.tasks.builtin_suite import load_builtin
from tritonrl_lib.tasks.kb_format import module_constants
from tritonrl_lib.train.rl.reward_tasks import scaled_task, tasks_for_training, training_sizes
from tritonrl_lib.verify.batch import training_verify_config
from tritonrl_lib.verify.pool import VerifierPool, workers_per_gpu_for_cores
from tritonrl_lib.verify.candidate.variations import load_task_module, size_constants


@pytest.fixture(scope="module")
def full_suite():
    return {t.name: t for t in load_builtin("full")}


def test_batch_like_sizes_shrink_and_model_sizes_stay(full_suite):
    t = full_suite["relu"]
    before = module_constants(t.source)
    s = scaled_task(t, 4)
    after = module_constants(s.source)
    changed = {k for k in before if before[k] != after[k]}
    assert changed and all(after[k] == max(1, before[k] // 4) for k in changed)
    assert s.id == t.id and s.meta["train_task_scale"] == 4 and s.meta["training_sizes"]
    # a task whose model is sized by its constants keeps its model: only input-only sizes change
    fused = full_suite["gemm_bias_gelu"]
    new = training_sizes(fused.source, 4)
    init_names = size_constants(fused.source).init_names
    assert new and init_names, fused.name
    assert not set(new) & init_names


def test_square_matmul_without_a_batch_name_shrinks_its_first_input_size(full_suite):
    t = full_suite["matmul"]
    assert training_sizes(t.source, 4) == {"N": module_constants(t.source)["N"] // 4}


def test_scale_one_is_the_task_itself_and_below_one_is_refused(full_suite):
    tasks = list(full_suite.values())[:3]
    assert tasks_for_training(tasks, 1) == tasks
    with pytest.raises(ValueError, match="train_task_scale"):
        tasks_for_training(tasks, 0)


def test_every_builtin_task_runs_at_training_sizes(tmp_path):
    """Each of the suite's 291 modules, scaled, still builds its model and runs it on its own inputs
    (small preset, so the CPU can run them all), and its init inputs are unchanged."""
    for t in load_builtin("small"):
        s = scaled_task(t, 4)
        if s is t:
            continue
        mod = load_task_module(s.source, str(tmp_path), f"scaled_{t.name}")
        orig = load_task_module(t.source, str(tmp_path), f"orig_{t.name}")
        assert mod.get_init_inputs() == orig.get_init_inputs(), t.name
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs())
        with torch.no_grad():
            out = model(*mod.get_inputs())
        assert out is not None, t.name


def test_for_training_changes_only_timing_budget_and_width():
    v = VerifyConfig(timing_trials=50, timing_warmup=10, workers_per_gpu=4, train_timing_trials=7,
                     train_timing_warmup=2, train_workers_per_gpu=0)
    t = v.for_training()
    assert (t.timing_trials, t.timing_warmup, t.workers_per_gpu) == (7, 2, 0)
    assert t.timeout_s == min(v.timeout_s, v.train_timeout_s)
    assert VerifyConfig(timeout_s=10, train_timeout_s=60).for_training().timeout_s == 10  # never longer
    same = {f.name for f in dataclasses.fields(VerifyConfig)} - {"timing_trials", "timing_warmup", "workers_per_gpu",
                                                                  "timeout_s"}
    assert all(getattr(t, n) == getattr(v, n) for n in same)
    assert (v.timing_trials, v.workers_per_gpu) == (50, 4)  # the evaluation's settings are untouched
    cfg = load_config("gpu")
    assert training_verify_config(cfg).timing_trials == cfg.verify.train_timing_trials
    assert cfg.rl.train_task_scale == 4


def test_workers_per_gpu_from_cores():
    assert workers_per_gpu_for_cores(1, 16) == 12
    assert workers_per_gpu_for_cores(8, 128) == 12
    assert workers_per_gpu_for_cores(1, 2) == 4  # never fewer than the default
    assert workers_per_gpu_for_cores(1, 64) == 16  # nor more than 16 per GPU


def test_bad_training_settings_are_refused():
    with pytest.raises(ConfigError, match="train_timing_trials"):
        load_config("smoke", overrides={"train_timing_trials": 0})
    with pytest.raises(ConfigError, match="train_task_scale"):
        load_config("smoke", overrides={"train_task_scale": 0})
    with pytest.raises(ConfigError, match="workers_per_gpu"):
        load_config("smoke", overrides={"workers_per_gpu": -1})


def test_verdicts_at_training_sizes_keep_their_rules():
    """On the CPU verifier: reference solutions stay correct on their scaled tasks (elementwise, a
    square matmul, a Level-2 fusion), and a kernel for another op stays wrong."""
    small = {t.name: t for t in load_builtin("small")}
    names = ["gelu", "matmul", next(n for n, t in small.items() if t.level == 2 and t.reference_solution)]
    tasks = [scaled_task(small[n], 2) for n in names]
    assert all(t.source != small[n].source for t, n in zip(tasks, names))
    completions = [f"```python\n{small[n].reference_solution}```" for n in names]
    wrong_task, wrong_code = tasks[0], f"```python\n{small['relu'].reference_solution}```"
    cfg = load_config("smoke").verify.for_training()
    with VerifierPool(cfg, workers=2, device="cpu", cache=False, progress=False) as pool:
        got = pool.map([*tasks, wrong_task], [*completions, wrong_code])
    assert [v.correct for v in got] == [True, True, True, False], [(v.reason, v.error) for v in got]
    assert got[-1].reason.startswith("mismatch"), got[-1].reason
