"""The one prompt: SFT, RL and evaluation all ask the model the same question the same way.

A prompt is a system message plus a user message holding a short instruction and the code of the
task's PyTorch reference (`prompt_source(Task.source)`: its docstrings and comments left out, its
layout normalised, so modules written in different hands read alike). The answer we train towards, and the one the verifier's
`extract_code` reads, is the complete solution module in one fenced ```python block, optionally
after a single lead-in line. The wording is deliberately short: the cpu profile trains a 135M
model with a ~1k-token context, and every prompt token is one the solution cannot use.
"""

from __future__ import annotations

import ast
from typing import Any, Protocol

from ..tasks.task import Task

SYSTEM_PROMPT = "You write correct, fast Triton GPU kernels."

INSTRUCTION = (
    "Rewrite this PyTorch module with Triton: `class ModelNew(nn.Module)`, same constructor and "
    "forward arguments as `Model`, same result, computed by `@triton.jit` kernels launched in "
    "forward. Reply with the complete module in one ```python block."
)

FENCE_OPEN = "```python"
FENCE_CLOSE = "```"


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


def fenced(code: str) -> str:
    """`code` inside one ```python fence (trailing blank lines trimmed, one newline kept inside)."""
    return f"{FENCE_OPEN}\n{code.strip(chr(10)).rstrip()}\n{FENCE_CLOSE}"


def prompt_source(source: str) -> str:
    """The task's module as the model is shown it: the code alone, docstrings and comments left out and
    the layout normalised (`ast.unparse`). What a module computes is its code; its prose and layout
    vary with whoever wrote it, and a small model should not have to learn every writer's habits to
    read the task. The verifier always runs the task's own source. A source that does not parse is
    shown as it is."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def user_message(task: Task) -> str:
    return f"{INSTRUCTION}\n\n{fenced(prompt_source(task.source))}"


def build_messages(task: Task) -> list[dict[str, str]]:
    """The conversation that asks for a solution of `task` (no assistant turn)."""
    if not task.source or not task.source.strip():
        raise ValueError(f"task {task.id!r} has an empty source; a prompt needs the PyTorch reference")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(task)},
    ]


def format_prompt(tokenizer: ChatTokenizer, task: Task) -> str:
    """The prompt text as the model sees it: the tokenizer's chat template with the assistant
    turn opened (`add_generation_prompt=True`), ready for generation."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "the tokenizer has no chat template; load it with tritonrl_lib.model.load.load_tokenizer, "
            "which installs a ChatML template when a model ships none"
        )
    return tokenizer.apply_chat_template(build_messages(task), tokenize=False, add_generation_prompt=True)


def format_completion(solution_code: str, lead_in: str = "") -> str:
    """The target answer: one fenced block holding the solution, after an optional one-line lead-in."""
    if not solution_code or not solution_code.strip():
        raise ValueError("empty solution: a completion needs the ModelNew module's code")
    lead = lead_in.strip()
    if "\n" in lead:
        raise ValueError(f"lead_in must be a single line, got {lead_in!r}")
    block = fenced(solution_code)
    return f"{lead}\n{block}" if lead else block


def sft_record(task: Task, solution: str, lead_in: str = "") -> dict[str, list[dict[str, str]]]:
    """One SFT example in TRL's conversational prompt/completion form, so SFTTrainer puts the loss
    on the assistant's completion only."""
    return {
        "prompt": build_messages(task),
        "completion": [{"role": "assistant", "content": format_completion(solution, lead_in)}],
    }
