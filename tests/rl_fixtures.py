"""Helpers for the RL tests: a run folder with what 01_data and 02_sft leave behind, made quickly
through the library (a fresh LoRA adapter saved as the SFT checkpoint, the real split)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import RunConfig, load_config
from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.pool import VerifierPool

# Two Level-1 tasks and one Level-2 task whose reference solutions verify in about a second under
# the interpreter.
RL_TASKS = "builtin/L1/relu,builtin/L1/add,builtin/L2/gemm_bias_relu"


def smoke_config(outputs_dir: Path, **overrides: Any) -> RunConfig:
    base = {"outputs_dir": str(outputs_dir), "rl_tasks": RL_TASKS}
    base.update(overrides)
    return load_config("smoke", overrides=base)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """A verifier pool with the smoke profile's settings, shared by a module's RL tests (import it by name)."""
    cfg = smoke_config(tmp_path_factory.mktemp("pool"))
    p = VerifierPool(cfg.verify, progress=False)
    yield p
    p.close()


def prepare_run(cfg: RunConfig, split: bool = False) -> None:
    """The SFT adapter RL starts from (a fresh LoRA on the tiny model: what `train_sft` saves, minus
    the training) and, when asked, the data stage's split."""
    paths = cfg.paths.ensure()
    if not models.checkpoint_complete(paths.sft_checkpoint):
        model, tok = models.load_policy(cfg, trainable=True)
        models.save_checkpoint(model, tok, paths.sft_checkpoint, base_model=cfg.model.model,
                               extra={"stage": "sft", "note": "untrained LoRA for the RL tests"})
    if split and not paths.split.is_file():
        from tritonrl_lib.data.split import make_split

        tasks = load_tasks("builtin", size=cfg.data.task_size)
        make_split(cfg.seed, cfg.data.heldout_fraction, tasks).save(paths.split)


def good_and_bad(task: Task, round_index: int) -> list[str]:
    """An extra_candidates hook: the task's reference solution (correct) and a solution of another
    task (a real Triton module that computes the wrong thing for this one)."""
    tasks = {t.id: t for t in load_tasks("builtin", size="small")}
    other = tasks["builtin/L1/add" if task.id != "builtin/L1/add" else "builtin/L1/relu"]
    return [format_completion(task.reference_solution), format_completion(other.reference_solution)]
