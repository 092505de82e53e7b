"""prompts.py: one prompt for SFT, RL and eval, applied through a real tokenizer's chat template."""

from __future__ import annotations

import ast

import pytest

from tritonrl_lib.model import load as models
from tritonrl_lib.verify.extract import extract_code
from tritonrl_lib.model.prompts import (INSTRUCTION, SYSTEM_PROMPT, build_messages, format_completion, format_prompt,
                                        prompt_source, sft_record)
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.task import Task


@pytest.fixture(scope="module")
def relu_task() -> Task:
    return next(t for t in load_tasks("builtin", size="small") if t.op_family == "relu")


@pytest.fixture(scope="module")
def tokenizer():
    # a real BPE tokenizer with a chat template, built offline (the tiny test model's)
    return models.load_tokenizer("tiny")


def test_messages_hold_instruction_and_the_reference_code(relu_task):
    msgs = build_messages(relu_task)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == SYSTEM_PROMPT
    user = msgs[1]["content"]
    assert user.startswith(INSTRUCTION)
    assert "ModelNew" in user and "```python" in user
    assert prompt_source(relu_task.source) in user  # the reference's code, its prose left out
    assert '"""' not in user and "def get_inputs" in user and "torch.relu" in user


def _code(tree: ast.AST) -> str:
    """A module's code without its docstrings, as a comparable dump."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def test_the_prompt_shows_the_same_code_without_prose_or_layout():
    written = ('''"""A module docstring."""
import torch   # a comment
import torch.nn as nn


class Model(nn.Module):
    """What it does.

    Args:
        alpha (float): a scale.
    """

    def __init__(self, alpha: float):
        super(Model, self).__init__()
        self.alpha = alpha  # kept


    def forward(self, x):
        """Returns alpha * relu(x)."""
        return self.alpha*torch.relu( x )   # the op


batch_size=16   # rows
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return [2.0]  # No special initialization inputs needed
''')
    shown = prompt_source(written)
    assert "#" not in shown and '"""' not in shown and "Args" not in shown
    assert _code(ast.parse(shown)) == _code(ast.parse(written))  # the same computation, constants and sizes
    assert "dim = 393216" in shown and "return self.alpha * torch.relu(x)" in shown
    # written two ways, shown one way
    assert prompt_source(written) == prompt_source(written.replace("self.alpha*torch.relu( x )",
                                                                  "self.alpha * torch.relu(x)"))
    assert prompt_source("class Broken(:\n") == "class Broken(:\n"  # what does not parse is shown as it is


def test_empty_source_is_an_error_naming_the_task():
    with pytest.raises(ValueError, match="builtin/L1/x"):
        build_messages(Task(id="builtin/L1/x", level=1, name="x", source="  "))


def test_format_prompt_applies_the_chat_template_with_generation_prompt(tokenizer, relu_task):
    text = format_prompt(tokenizer, relu_task)
    assert text.count("<|im_start|>") == 3  # system, user, and the opened assistant turn
    assert text.rstrip("\n").endswith("<|im_start|>assistant")
    assert SYSTEM_PROMPT in text and prompt_source(relu_task.source) in text
    # the same text the tokenizer makes from the messages itself: no second template anywhere
    assert text == tokenizer.apply_chat_template(build_messages(relu_task), tokenize=False, add_generation_prompt=True)


def test_format_prompt_needs_a_chat_template(relu_task):
    class NoTemplate:
        chat_template = None

        def apply_chat_template(self, *a, **k):
            raise AssertionError("must not be called")

    with pytest.raises(ValueError, match="chat template"):
        format_prompt(NoTemplate(), relu_task)


def test_completion_is_one_fenced_block_that_extract_code_reads_back(relu_task):
    solution = relu_task.reference_solution
    completion = format_completion(solution)
    assert completion.startswith("```python\n") and completion.endswith("\n```")
    assert completion.count("```") == 2
    assert extract_code(completion).code.strip() == solution.strip()
    led = format_completion(solution, lead_in="Here is the Triton version:")
    assert led.splitlines()[0] == "Here is the Triton version:"
    assert extract_code(led).code.strip() == solution.strip()
    with pytest.raises(ValueError, match="single line"):
        format_completion(solution, lead_in="two\nlines")
    with pytest.raises(ValueError, match="empty solution"):
        format_completion("   ")


def test_sft_record_is_trl_conversational_prompt_completion(relu_task, tokenizer):
    rec = sft_record(relu_task, relu_task.reference_solution)
    assert set(rec) == {"prompt", "completion"}
    assert rec["prompt"] == build_messages(relu_task)
    assert rec["completion"] == [{"role": "assistant", "content": format_completion(relu_task.reference_solution)}]
    # prompt + completion through the template = the prompt text followed by the answer
    full = tokenizer.apply_chat_template(rec["prompt"] + rec["completion"], tokenize=False)
    assert full.startswith(format_prompt(tokenizer, relu_task))


def test_prompt_is_compact(tokenizer, relu_task):
    """The fixed part of the prompt (everything but the reference) stays small: the cpu profile's
    model has ~1k tokens of context for prompt and answer together."""
    empty = Task(id="t", level=1, name="t", source="pass")
    overhead = len(tokenizer(format_prompt(tokenizer, empty))["input_ids"])
    # the tiny tokenizer's 1k vocabulary splits words finely; SmolLM2's takes about half as many
    assert overhead < 170, overhead


@pytest.mark.slow
def test_embedded_smollm2_template_keeps_our_system_message(relu_task):
    """SmolLM2's own template adds a default system turn only when none is given."""
    try:
        tok = models.load_tokenizer("embedded")
    except models.ModelLoadError as e:
        pytest.skip(str(e))
    text = format_prompt(tok, relu_task)
    assert "SmolLM" not in text and SYSTEM_PROMPT in text
    assert len(tok(format_prompt(tok, Task(id="t", level=1, name="t", source="pass")))["input_ids"]) < 100
