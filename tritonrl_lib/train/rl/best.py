"""The best measured policy of an RL run: its adapter in checkpoints/rl/best/ and its record in
checkpoints/rl/best.json (method, round or step, metric, value, path). A policy is measured by the
rewards of the samples drawn from it; the report names the best one."""

from __future__ import annotations

import time
from typing import Any

from ...core.jsonio import read_json, write_json
from ...core.paths import RunPaths
from ...model import load as models


def read_best(paths: RunPaths) -> dict[str, Any] | None:
    return read_json(paths.rl_best, None)


def maybe_record_best(paths: RunPaths, model, tokenizer, base_model: str, *, method: str, where: dict[str, Any],
                      stats: dict[str, Any]) -> bool:
    """Save `model` as the best policy when the mean reward of its samples (`stats`, from
    rl_log.verdict_stats) beats the recorded one (ties keep the earlier)."""
    value = stats["mean_reward"]
    if value is None:  # no samples of the policy's own: nothing measured
        return False
    best = read_best(paths)
    if best is not None and best.get("method") == method and float(best.get("value", float("-inf"))) >= value:
        return False
    folder = paths.rl_best_adapter
    models.save_checkpoint(model, tokenizer, folder, base_model=base_model,
                           extra={"stage": "rl", "method": method, "best": True, **where})
    write_json(paths.rl_best, {"method": method, **where, "metric": "mean_reward", "value": value,
                               "path": str(folder), "correct_rate": stats["correct_rate"],
                               "samples": stats["samples"], "recorded": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return True
