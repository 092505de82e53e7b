"""One RL candidate: a completion for a task, with its verdict once verified.

A *group* is one task's `n_samples` candidates (groups.py). Best-of-N writes every candidate of a
round to rounds/round-NNN/samples.jsonl as `to_dict()` and reads a resumed round back with
`from_dict()`: the line's keys and their order are the file format, the same as before candidates
were objects, so a run written then still resumes. `token_ids` stay in memory (GRPO hands them to
its trainer) and were never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# What a refinement's `history` keeps of each earlier verdict: what its feedback turn says.
HISTORY_VERDICT_KEYS = ("stage", "reason", "error")


@dataclass
class Candidate:
    task_id: str
    sample_index: int  # within its group; an injected candidate's follows the policy's (best-of-N)
    text: str
    level: int = 0
    group: int = 0  # the slot of its group in the step; a redrawn group's slots come after the first draw's
    turn: int = 0  # 0 the first attempt; a refinement's turn
    injected: bool = False  # from the extra_candidates hook: never counted as the policy's
    token_ids: list[int] = field(default_factory=list, repr=False)  # in memory only (GRPO)
    num_tokens: int = 0
    finish_reason: str = ""  # the rollout's (fence | eos | length), or "injected"
    seconds: float = 0.0
    parent: str | None = None  # a refinement: `key` of the first attempt it fixes
    history: list | None = None  # a refinement: [[text, {stage, reason, error}], ...] of the attempts before it
    verdict: dict[str, Any] | None = None  # Verdict.to_dict(), once verified
    reward: float | None = None  # the trajectory's reward (refine.py), once verified
    first_reward: float | None = None  # a refined first attempt: its own reward, before the trajectory's

    @property
    def key(self) -> str:
        """Names a first attempt within its step (what a refinement's `parent` holds)."""
        return f"{self.group}:{self.sample_index}"

    @property
    def correct(self) -> bool:
        return bool(self.verdict and self.verdict.get("correct"))

    @property
    def policy_first_attempt(self) -> bool:
        """The policy's own first try: what its statistics and the curriculum count."""
        return not self.injected and self.turn == 0

    def set_verdict(self, verdict) -> None:
        """Record a Verdict; the reward starts as this attempt's own (refinement may raise it)."""
        self.verdict = verdict.to_dict()
        self.reward = float(verdict.reward)

    def history_entry(self) -> list:
        """This attempt as a later refinement's history holds it."""
        return [self.text, {k: (self.verdict or {}).get(k) for k in HISTORY_VERDICT_KEYS}]

    def to_dict(self) -> dict[str, Any]:
        """samples.jsonl's line: these keys in this order; the optional ones only when set."""
        out: dict[str, Any] = {"task_id": self.task_id, "level": self.level, "group": self.group,
                               "sample_index": self.sample_index, "turn": self.turn, "injected": self.injected,
                               "text": self.text, "num_tokens": self.num_tokens,
                               "finish_reason": self.finish_reason, "seconds": self.seconds}
        for name in ("parent", "history", "verdict", "reward", "first_reward"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Candidate":
        """A samples.jsonl line back (keys it does not know are ignored; missing ones take defaults,
        as the readers of the dicts once did with `.get`)."""
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)

    def kept_record(self) -> dict[str, Any]:
        """kept.jsonl's line for a kept candidate."""
        verdict = self.verdict or {}
        return {"task_id": self.task_id, "sample_index": self.sample_index, "turn": self.turn,
                "injected": self.injected, "text": self.text, "history": self.history,
                "reward": verdict["reward"], "speedup": verdict.get("speedup")}


def as_candidate(c: "Candidate | Mapping[str, Any]") -> Candidate:
    """A Candidate, from one or from its dict (a samples.jsonl line)."""
    return c if isinstance(c, Candidate) else Candidate.from_dict(c)
