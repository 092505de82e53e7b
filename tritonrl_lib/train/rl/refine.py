"""Refinement with the verifier's feedback (Kevin-style multi-turn RL): a candidate the verifier
rejected goes back to the policy as a conversation, the verdict's reason and an excerpt of its
error as the next user turn, and the policy writes the module again.

    messages = refinement_messages(task, history)    # history: [(completion, verdict), ...]
    reward = discounted_reward([r0, r1, ...], discount)

The reward of a trajectory (a first attempt and its refinements) is the best discounted reward
along it, `max_t discount**t * r_t`: a kernel fixed on the second turn earns less than one right
the first time, more than the broken first attempt. (Kevin sums the discounted rewards of the later
turns instead; with this project's reward ladder a sum would rank "compiled, then fixed" above
"right at once", so the best turn is taken.)
"""

from __future__ import annotations

from typing import Any, Sequence

from ...model.prompts import FENCE_OPEN, build_messages
from ...tasks.task import Task
from ...verify.verdict import clip_error

ERROR_EXCERPT_CHARS = 600

REASON_HINTS = {
    "no_code": "no Python code block was found in the answer",
    "empty_completion": "the answer was empty",
    "compile_error": "the module did not import or a kernel did not compile",
    "timeout": "it ran past the time limit",
}


def feedback_text(verdict: dict[str, Any]) -> str:
    """The next user turn for a rejected candidate: what the verifier said, briefly."""
    reason = str(verdict.get("reason") or "rejected")
    head = reason.split(":", 1)[0]
    hint = REASON_HINTS.get(head)
    # where it happened (the first line) and the exception itself (a traceback's end), as one paragraph
    error = " ".join(clip_error(str(verdict.get("error") or "").strip(), ERROR_EXCERPT_CHARS).split())
    lines = [f"The verifier rejected this module at the `{verdict.get('stage', 'none')}` stage: {reason}"
             + (f" ({hint})." if hint else ".")]
    if error:
        lines.append(f"Error: {error}")
    lines.append(f"Fix it. Reply with the complete corrected module in one {FENCE_OPEN} block.")
    return "\n".join(lines)


def history_messages(history: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, str]]:
    """The turns after the first prompt: each earlier attempt and the verifier's feedback on it."""
    out: list[dict[str, str]] = []
    for completion, verdict in history:
        out.append({"role": "assistant", "content": completion.strip()})
        out.append({"role": "user", "content": feedback_text(verdict)})
    return out


def refinement_messages(task: Task, history: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, str]]:
    """The whole conversation that asks for the next attempt (no assistant turn at the end)."""
    if not history:
        raise ValueError("a refinement needs at least one earlier attempt and its verdict")
    return build_messages(task) + history_messages(history)


def refinement_prompt(tokenizer, task: Task, history: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return tokenizer.apply_chat_template(refinement_messages(task, history), tokenize=False,
                                         add_generation_prompt=True)


def discounted_reward(rewards: Sequence[float], discount: float) -> float:
    """The reward of a trajectory: the best `discount**turn * reward` along it."""
    if not rewards:
        raise ValueError("a trajectory has at least one turn")
    return max(discount ** t * float(r) for t, r in enumerate(rewards))
