"""extra_candidates hooks for the multi-process RL tests, named `rl_rank_hooks:<function>` so the
launched processes (tests/ on their PYTHONPATH) import them. Besides adding candidates, a hook can
kill the rank it runs in: with TRITONRL_TEST_DIE="RANK:STEP" in the environment, rank RANK SIGKILLs
itself when asked for step (GRPO) or round (best-of-N) STEP's candidates, mid-step, after its
generation. With TRITONRL_TEST_STALL="STEP", every rank stalls there instead."""

from __future__ import annotations

import os
import signal
import time

from tritonrl_lib.model.prompts import format_completion

from rl_fixtures import good_and_bad

DIE = "TRITONRL_TEST_DIE"
STALL = "TRITONRL_TEST_STALL"  # "STEP": every rank waits there (a launch to interrupt while its ranks work)
NOTHING_TO_KEEP = "builtin/L1/relu"  # best-of-N: this task's groups hold no correct candidate (redrawn)


def _maybe_die(step: int) -> None:
    if os.environ.get(STALL) and step >= int(os.environ[STALL]):
        time.sleep(600)
    rank, _, at = os.environ.get(DIE, "").partition(":")
    if rank and os.environ.get("RANK", "0") == rank and step == int(at):
        os.kill(os.getpid(), signal.SIGKILL)


def best_of_n_candidates(task, round_index: int) -> list[str]:
    """The reference solution and a wrong solution; for NOTHING_TO_KEEP, the wrong one alone."""
    _maybe_die(round_index)
    both = good_and_bad(task, round_index)
    return both[1:] if task.id == NOTHING_TO_KEEP else both


def grpo_candidates(task, step: int) -> list[str]:
    """The task's reference solution (it replaces the first sample of each group)."""
    _maybe_die(step)
    return [format_completion(task.reference_solution)]
