"""RL, one entry for both methods: `train_rl(cfg)` runs cfg.rl.method from the run's SFT adapter.

    best_of_n   best_of_n.py: sample, verify, keep the top k correct per task, fine-tune; per round
    grpo        grpo.py: TRL's GRPOTrainer with rewards from the verifier pool; per optimizer step

Both open their run the same way (run_frame.py: start adapter and tasks from start.py, resume or a
fresh start), draw tasks through the curriculum (curriculum.py), sample with rollout/, verify in
the verifier pool, and record the best policy (best.py) and one log line per round or step
(log.py). They return an `RLResult`.
"""

from __future__ import annotations

from ...core.config import ConfigError, RunConfig
from ...core.paths import RunPaths
from ...model.load import explain_oom
from .best_of_n import train_best_of_n
from .grpo import train_grpo
from .run_frame import RLResult

METHODS = {"best_of_n": train_best_of_n, "grpo": train_grpo}


def train_rl(cfg: RunConfig, paths: RunPaths | None = None, **kwargs) -> RLResult:
    """Run cfg.rl.method (best_of_n | grpo) with `kwargs` passed through (pool=, force=, echo=, ...)."""
    trainer = METHODS.get(cfg.rl.method)
    if trainer is None:
        raise ConfigError(f"rl.method={cfg.rl.method!r}: expected {' or '.join(METHODS)}")
    with explain_oom(cfg.rl.method, cfg):  # out of GPU memory: which setting to lower
        return trainer(cfg, paths, **kwargs)
