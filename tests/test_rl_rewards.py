"""The verifier's reward as a plain function in TRL's form, with the CPU verifier: a reference
solution earns the top reward there is without timing, garbage earns nothing; GRPO's reward
function hands TRL the rollout's rewards when it has them and verifies through it otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tritonrl_lib.model.prompts import format_completion
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.train.rl.grpo import GRPOPieces
from tritonrl_lib.train.rl.rewards import completion_text, reward
from tritonrl_lib.verify.batch import training_verify_config
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.reward import DEFAULT_LADDER

from rl_fixtures import smoke_config


class CountingPool(VerifierPool):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sent = 0

    def map(self, tasks, completions, **kw):
        self.sent += len(completions)
        return super().map(tasks, completions, **kw)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return smoke_config(tmp_path_factory.mktemp("rewards"))


@pytest.fixture(scope="module")
def pool(cfg):
    p = CountingPool(cfg.verify, progress=False)
    yield p
    p.close()


@pytest.fixture(scope="module")
def suite():
    return {t.id: t for t in load_tasks("builtin", size="small")}


def test_a_completion_is_its_text_or_its_last_message():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "reply"}]) == "reply"


@pytest.mark.slow
def test_reference_solutions_earn_the_top_reward_and_garbage_nothing(cfg, pool, suite):
    relu, add = suite["builtin/L1/relu"], suite["builtin/L1/add"]
    good_relu, good_add = format_completion(relu.reference_solution), format_completion(add.reference_solution)
    completions = [good_relu, good_add, "no code at all", "```python\nclass ModelNew(:\n```",
                   [{"role": "assistant", "content": good_relu}]]  # TRL's conversational form
    tasks = [relu, add, relu, add, relu]
    before = pool.sent
    got = reward(completions, tasks, pool=pool, config=training_verify_config(cfg),
                 prompts=["ignored"] * 5, completion_ids=None, trainer_state=None)  # what TRL passes besides
    full = DEFAULT_LADDER.full  # correct, no timing on the CPU: 0.7
    assert got == [full, full, 0.0, 0.0, full]
    assert pool.sent - before == 4  # relu's reference twice: verified once
    (wrong,) = reward([good_add], [relu], pool=pool)  # a real kernel, of another task: a lower rung
    assert 0.0 < wrong < full


@pytest.mark.slow
def test_grpo_reward_takes_the_rollouts_rewards_and_verifies_the_rest(cfg, pool, suite):
    relu = suite["builtin/L1/relu"]
    pieces = SimpleNamespace(pool=pool, verify_config=training_verify_config(cfg), tasks_by_id={relu.id: relu})
    before = pool.sent
    assert GRPOPieces.__call__(pieces, prompts=None, completions=["x"], task_id=[relu.id], reward=[0.5]) == [0.5]
    assert pool.sent == before  # the fast path: rewards computed with their verdicts in the rollout
    good = [{"role": "assistant", "content": format_completion(relu.reference_solution)}]
    assert GRPOPieces.__call__(pieces, prompts=None, completions=[good, "junk"],
                               task_id=[relu.id, relu.id]) == [DEFAULT_LADDER.full, 0.0]
    with pytest.raises(ValueError, match="task_id"):
        GRPOPieces.__call__(pieces, prompts=None, completions=["x"])
