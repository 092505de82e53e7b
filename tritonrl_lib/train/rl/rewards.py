"""The verifier's reward as a plain function, in the form of TRL's reward functions
(`trl/rewards/format_rewards.py`: a function of the completions, keyword arguments for the rest):

    rewards = reward(completions, tasks, pool=pool, config=training_verify_config(cfg))

Each completion is verified against its task in the verifier pool (verify/batch.py's
`verify_unique`: identical code verified once) and scored by the reward ladder (verify/reward.py),
so the call waits for every verdict. That is the plain path, for a caller with completions and
nothing else. Training takes the fast path: best-of-N and GRPO verify each chunk of completions in
the background while the next generates (`VerifyAhead`, through groups.collect_step), and GRPO's
reward function (grpo.py) hands TRL the rewards computed there, coming here only for completions
that were not verified with their rollout.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...tasks.task import Task
from ...verify.batch import verify_unique


def completion_text(completion: Any) -> str:
    """A completion as TRL passes it: a string, or a conversational one's messages (the last is the
    model's reply)."""
    return completion[-1]["content"] if isinstance(completion, list) else str(completion)


def reward(completions: Sequence[Any], tasks: Sequence[Task], *, pool=None, config=None, desc: str = "verify",
           **kw: Any) -> list[float]:
    """Each completion's reward against its task: the verdict's rung of the reward ladder.

    `pool`: the VerifierPool to verify in (default: the module-level shared pool of verify/api.py).
    `config`: its VerifyConfig for these jobs (default: the pool's own). Other keyword arguments
    (TRL passes prompts, completion_ids, trainer_state and the dataset's columns) are ignored."""
    if pool is None:
        from ...verify.api import default_pool  # imports torch with the pool: only when no pool is given

        pool = default_pool()
    texts = [completion_text(c) for c in completions]
    verdicts, _ = verify_unique(pool, list(tasks), texts, config=config, desc=desc)
    return [float(v.reward) for v in verdicts]
