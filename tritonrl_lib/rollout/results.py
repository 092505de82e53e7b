"""What a rollout returns: the completions, grouped by prompt, and the statistics of the call."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FINISH_REASONS = ("fence", "eos", "length", "loop")  # loop: stopped in a loop (stopping.LoopStop)


@dataclass
class Completion:
    prompt_index: int
    sample_index: int
    text: str  # decoded without special tokens
    token_ids: list[int]  # what the model generated, through the stop token
    num_tokens: int
    prompt_tokens: int
    finish_reason: str  # fence | eos | length | loop
    seconds: float  # from the start of its batch to the step its stop was seen
    logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RolloutStats:
    engine: str = ""
    device: str = ""
    sequences: int = 0
    prompts: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    wall_s: float = 0.0
    prefill_s: float = 0.0
    decode_steps: int = 0
    batches: int = 0
    cuda_graphs: int = 0  # graphs captured during this call
    compactions: int = 0  # times finished rows were dropped from the decode batch
    finish_reasons: dict[str, int] = field(default_factory=dict)  # FINISH_REASONS -> sequences
    note: str = ""  # why the lean engine was not used, when it was not

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens_per_s"] = round(self.tokens_per_s, 1)
        return d


@dataclass
class RolloutResult:
    completions: list[list[Completion]]  # [prompt][sample]
    stats: RolloutStats

    def flat(self) -> list[Completion]:
        return [c for group in self.completions for c in group]
