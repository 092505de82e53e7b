"""How to sample: `SamplingConfig`, the settings of one `Rollout.generate` call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .stopping import LOOP_LINES


@dataclass
class SamplingConfig:
    n_samples: int = 1
    temperature: float = 0.8  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32  # sequences decoded at once
    seed: int = 0
    stop_at_fence: bool = True
    loop_lines: int = LOOP_LINES  # stop a loop (stopping.LoopStop) once its repeats cover this many lines; 0 = off
    engine: str = "auto"  # auto (lean where supported, else hf) | lean | hf
    cuda_graphs: bool = True  # lean engine on CUDA only
    check_every: int = 0  # host-side stop check every k decode steps; 0 = 8 on CUDA, 1 on CPU
    return_logprobs: bool = False  # log p(token) under softmax(logits / temperature), per token

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {self.n_samples}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size (rollout_batch_size) must be at least 1, got {self.batch_size}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.loop_lines < 0 or self.loop_lines == 1:
            raise ValueError(f"loop_lines must be 0 (off) or at least 2, got {self.loop_lines}")
        if self.engine not in ("auto", "lean", "hf"):
            raise ValueError(f"engine={self.engine!r}: expected auto, lean or hf")

    @classmethod
    def from_config(cls, cfg, **overrides: Any) -> "SamplingConfig":
        """The RL stage's sampling settings from a RunConfig (overrides win)."""
        rl = cfg.rl
        base = dict(n_samples=rl.n_samples, temperature=rl.temperature, top_p=rl.top_p,
                    max_new_tokens=rl.max_new_tokens, batch_size=rl.rollout_batch_size, seed=cfg.seed)
        base.update(overrides)
        return cls(**base)

