"""extract_code on the completion shapes models really emit (issue 3, point 1).

Each case is a realistic completion around a real Triton solution (tests/extract_cases/) and
asserts the exact module that comes out, or the machine reason when there is none.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from tritonrl_lib.verify.extract import Extraction, extract_code
from tritonrl_lib.core.fences import closing_fence, opening_fence
from tritonrl_lib.rollout import closes_code_block

CASES = Path(__file__).parent / "extract_cases"
ADD = (CASES / "vector_add_relu.py").read_text()
SOFTMAX = (CASES / "softmax.py").read_text()
MATMUL = (CASES / "matmul_autotuned.py").read_text()
CONV = (CASES / "conv_relu_bias_fusion.py").read_text()
LINEAR = (CASES / "linear_gelu_fusion.py").read_text()
SOLUTIONS = [ADD, SOFTMAX, MATMUL, CONV, LINEAR]

# The task's reference, as models often echo it before answering.
REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []
'''

# A first attempt that falls back to PyTorch: models write one like it in their reasoning.
DRAFT = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)
'''

KERNEL_ONLY, MODEL_ONLY = ADD.split("\n\n\nclass ModelNew")
MODEL_ONLY = "class ModelNew" + MODEL_ONLY


def ok(completion: str) -> Extraction:
    ex = extract_code(completion)
    assert ex.reason == "ok", (ex.reason, ex.detail)
    assert ex.code is not None
    return ex


def same_module(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))


# --------------------------------------------------------------------------- fenced shapes


def test_python_fence_with_prose_around():
    completion = (
        "To fuse the addition and the ReLU, I'll write a single elementwise Triton kernel: each "
        "program handles BLOCK_SIZE contiguous elements and masks the tail.\n\n"
        f"```python\n{ADD}```\n\n"
        "The kernel reads `x` and `y` once and writes the output once, so it is memory-bound "
        "and should beat the two separate PyTorch ops.")
    ex = ok(completion)
    assert ex.code == ADD
    assert ex.candidates == 1 and ex.method == "fenced"


@pytest.mark.parametrize("tag", ["py", "Python", "PYTHON", "python3", "triton", "python title=solution.py", "{python}"])
def test_language_tags(tag):
    completion = f"Here is the optimized implementation:\n\n```{tag}\n{SOFTMAX}```\n"
    assert ok(completion).code == SOFTMAX


def test_untagged_fence():
    completion = f"Sure! Below is `ModelNew` using Triton.\n\n```\n{MATMUL}```\n\nLet me know if you need fp16."
    assert ok(completion).code == MATMUL


def test_tilde_fence():
    completion = f"Solution:\n~~~python\n{CONV}~~~\n"
    assert ok(completion).code == CONV


def test_longer_fence_keeps_inner_backticks():
    # A docstring that itself shows a markdown fence; the outer fence is four backticks long.
    code = ADD.replace('class ModelNew(nn.Module):\n',
                       'class ModelNew(nn.Module):\n    """Usage:\n\n    ```\n    y = ModelNew()(a, b)\n    ```\n    """\n\n')
    completion = f"Here you go:\n\n````python\n{code}````\n"
    ex = ok(completion)
    assert ex.code == code
    ast.parse(ex.code)


def test_reference_echo_then_solution():
    completion = (
        "The reference model is:\n\n"
        f"```python\n{REFERENCE}```\n\n"
        "It launches two kernels (add, then relu). Fusing them into one Triton kernel:\n\n"
        f"```python\n{ADD}```\n")
    ex = ok(completion)
    assert ex.code == ADD
    assert ex.candidates == 2


def test_draft_then_final_takes_last_modelnew():
    completion = (
        "First attempt (not using Triton yet):\n\n"
        f"```python\n{DRAFT}```\n\n"
        "That still uses PyTorch for the compute. Here's the real Triton version:\n\n"
        f"```python\n{ADD}```\n")
    ex = ok(completion)
    assert ex.code == ADD
    assert "2 blocks defining it" in ex.detail


def test_last_complete_block_wins_over_truncated_rewrite():
    truncated = SOFTMAX[: SOFTMAX.index("        out = triton_softmax(")] + "        out = triton_softmax(x.resh"
    completion = (
        f"```python\n{SOFTMAX}```\n\n"
        "We can also handle arbitrary rank by flattening the leading dims:\n\n"
        f"```python\n{truncated}")
    ex = ok(completion)
    assert ex.code == SOFTMAX


def test_split_blocks_are_merged():
    completion = (
        "Step 1 — the kernel:\n\n"
        f"```python\n{KERNEL_ONLY}\n```\n\n"
        "Step 2 — the module that launches it:\n\n"
        f"```python\n{MODEL_ONLY}```\n")
    ex = ok(completion)
    assert ex.method == "merged"
    assert ex.code == ADD  # blocks joined by two blank lines, as they were split


def test_usage_example_after_solution_is_ignored():
    usage = "model = ModelNew().cuda()\nx = torch.randn(4096, device='cuda')\nprint(model(x, x).shape)\n"
    completion = f"```python\n{ADD}```\n\nUsage:\n\n```python\n{usage}```\n"
    assert ok(completion).code == ADD


def test_modelnew_in_block_with_wrong_tag():
    completion = f"Here is the CUDA-accelerated version written in Triton:\n\n```cuda\n{ADD}```"
    assert ok(completion).code == ADD


def test_shell_block_and_python_block():
    completion = (
        "Make sure Triton is installed:\n\n```bash\npip install triton\n```\n\n"
        f"Then:\n\n```python\n{SOFTMAX}```\n")
    assert ok(completion).code == SOFTMAX


def test_markdown_headings_lists_and_bold():
    completion = (
        "## Analysis\n\n- The reference does `matmul` in fp32.\n- Tiling with grouped ordering "
        "improves L2 reuse.\n\n## Implementation\n\n"
        f"```python\n{MATMUL}```\n\n**Explanation:**\n\n1. `matmul_kernel` computes one "
        "BLOCK_M x BLOCK_N tile.\n2. The autotuner picks the block sizes per shape.\n")
    assert ok(completion).code == MATMUL


def test_inline_triple_backticks_in_prose_do_not_open_a_fence():
    completion = (
        "Each program calls ```tl.load``` with a mask, so the tail is safe.\n\n"
        f"```python\n{ADD}```\n")
    assert ok(completion).code == ADD


def test_no_modelnew_returns_last_python_block():
    completion = f"I only had time for the kernel:\n\n```python\n{KERNEL_ONLY}\n```\n"
    ex = ok(completion)
    assert ex.code == KERNEL_ONLY.rstrip("\n") + "\n"
    assert "no block defines ModelNew" in ex.detail


# --------------------------------------------------------------------------- reasoning sections


def test_think_section_code_is_ignored():
    completion = (
        "<think>\nThe simplest thing would be:\n```python\n" + DRAFT + "```\nbut that is just "
        "PyTorch. I need a Triton kernel with a mask for the tail.\n</think>\n\n"
        f"```python\n{ADD}```")
    ex = ok(completion)
    assert ex.code == ADD
    assert ex.candidates == 1


def test_think_closing_tag_only_when_prompt_opened_it():
    completion = (
        "Okay, the reference computes relu(x + y). Let me sketch:\n```python\n" + DRAFT +
        "```\nNo — this has to be Triton.\n</think>\n\n"
        f"Final answer:\n\n```python\n{ADD}```\n")
    assert ok(completion).code == ADD


def test_unclosed_think_with_code_is_think_only():
    completion = (
        "<think>\nLet me write the kernel first.\n```python\n" + ADD +
        "```\nNow I should double check the mask and the grid, and also consider whether")
    ex = extract_code(completion)
    assert ex.code is None
    assert ex.reason == "think_only"
    assert "never closed" in ex.detail


def test_unclosed_think_without_code_is_no_code():
    ex = extract_code("<think>\nThe reference is a softmax over dim=-1. I need the row max first, then")
    assert ex.code is None and ex.reason == "no_code"
    assert "unclosed <think>" in ex.detail


def test_thinking_tag_variant():
    completion = f"<thinking>draft: torch.softmax(x, -1)</thinking>\n```python\n{SOFTMAX}```"
    assert ok(completion).code == SOFTMAX


def test_answer_without_code_after_think_with_code():
    completion = f"<think>\n```python\n{ADD}```\n</think>\n\nI've written the kernel above."
    ex = extract_code(completion)
    assert ex.code is None and ex.reason == "think_only"


# --------------------------------------------------------------------------- truncation and fences


def test_unclosed_last_fence_that_parses():
    completion = f"Here is the kernel and module:\n\n```python\n{ADD}"
    ex = ok(completion)
    assert ex.code == ADD and ex.method == "unclosed_fence"


def test_unclosed_fence_truncated_mid_statement_is_kept_for_static():
    cut = MATMUL.index("    return c")
    completion = f"```python\n{MATMUL[:cut]}    return c if c.is_cont"
    ex = ok(completion)
    assert ex.code == MATMUL[:cut] + "    return c if c.is_cont\n"
    with pytest.raises(SyntaxError):
        ast.parse(ex.code)


def test_glued_closing_fence():
    completion = f"```python\n{ADD.rstrip()}```\nThis fuses both ops."
    assert ok(completion).code == ADD


def test_fence_opened_at_end_of_prose_line():
    completion = f"Here's the optimized code:```python\n{SOFTMAX}```"
    assert ok(completion).code == SOFTMAX


def test_one_fence_grammar_for_extraction_and_the_rollout_stop_rule():
    """fences.py is what both read: where a block opens, where it closes, the code glued to a close."""
    assert opening_fence("  ```python") == ("```", "python", 0)
    assert opening_fence("Here is the code:```py") == ("```", "py", len("Here is the code:"))
    assert opening_fence("inline ```code``` only") is None and opening_fence("```a``` b") is None
    assert opening_fence("~~~") == ("~~~", "", 0) and opening_fence("~~~", tildes=False) is None
    assert closing_fence("```", "```") == "" and closing_fence("`````", "````") == ""
    assert closing_fence("```", "````") is None and closing_fence("```python", "```") is None
    assert closing_fence("    return y```", "```") == "    return y" and closing_fence("~~~", "```") is None
    # a completion stops where extraction sees its first block close; ~~~ blocks do not stop it
    text = f"Sure:```python\n{ADD.rstrip()}```\nprose"
    assert closes_code_block(text) and extract_code(text).code == ADD
    tilde = f"~~~python\n{ADD}~~~\n"
    assert extract_code(tilde).method == "fenced" and not closes_code_block(tilde)


def test_prefilled_opening_fence():
    # The prompt ended with "```python\n", so the completion starts inside the block.
    completion = f"{CONV}```\n\nThe convolution stays in cuDNN; ReLU and bias are fused."
    ex = ok(completion)
    assert ex.code == CONV and ex.method == "prefilled_fence"


def test_indented_fence_in_list_item():
    indented = "".join(("   " + line if line else "") + "\n" for line in LINEAR.split("\n")[:-1])
    completion = f"1. Write the fused kernel:\n\n   ```python\n{indented}   ```\n\n2. Test it."
    assert ok(completion).code == LINEAR


def test_blank_lines_and_whitespace_inside_fence():
    completion = f"\n\n   ```python   \n\n\n{ADD}\n\n   \n```   \n\n"
    assert ok(completion).code == ADD


# --------------------------------------------------------------------------- bytes and tokens


def test_crlf_line_ends():
    completion = f"Solution:\r\n\r\n```python\r\n{ADD.replace(chr(10), chr(13) + chr(10))}```\r\n"
    ex = ok(completion)
    assert ex.code == ADD and "\r" not in ex.code


def test_chat_template_residue_after_code():
    completion = f"```python\n{SOFTMAX}```<|im_end|>\n<|endoftext|>"
    assert ok(completion).code == SOFTMAX


def test_eos_token_after_bare_module():
    assert ok(f"{ADD}</s>").code == ADD


def test_hallucinated_next_turn_is_cut():
    completion = (
        f"```python\n{ADD}```<|im_end|>\n<|im_start|>user\nNow do softmax.<|im_end|>\n"
        f"<|im_start|>assistant\n```python\n{SOFTMAX}```<|im_end|>")
    assert ok(completion).code == ADD


def test_role_header_leaked_at_start():
    completion = f"<|im_start|>assistant\nHere is the code.\n```python\n{MATMUL}```<|im_end|>"
    assert ok(completion).code == MATMUL


def test_llama_and_gemma_end_tokens():
    assert ok(f"```python\n{ADD}```<|eot_id|>").code == ADD
    assert ok(f"```python\n{ADD}```<end_of_turn>\n").code == ADD


def test_tab_indented_module_is_returned_as_written():
    tabbed = ADD.replace("    ", "\t")
    completion = f"```python\n{tabbed}```"
    ex = ok(completion)
    assert ex.code == tabbed
    assert same_module(ex.code, ADD)


def test_mixed_tabs_and_spaces_are_repaired():
    mixed = SOFTMAX.replace("        out = triton_softmax", "\t    out = triton_softmax")
    mixed = mixed.replace("        return out.view", "\t    return out.view")
    mixed = mixed.replace("        shape = x.shape", "        shape = x.shape")
    with pytest.raises(SyntaxError):  # TabError: inconsistent use of tabs and spaces
        ast.parse(mixed)
    ex = ok(f"```python\n{mixed}```")
    assert same_module(ex.code, SOFTMAX)
    assert "repaired tabs" in ex.detail


def test_html_escaped_code_is_unescaped():
    escaped = ADD.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    ex = ok(f"```python\n{escaped}```")
    assert ex.code == ADD
    assert "html" in ex.detail


def test_code_with_real_ampersand_entities_in_strings_is_left_alone():
    code = ADD.replace('"BLOCK_SIZE"]', '"BLOCK_SIZE"]  # see &lt;docs&gt;')
    assert ok(f"```python\n{code}```").code == code


# --------------------------------------------------------------------------- bare modules


def test_bare_module_no_fence():
    assert ok(ADD).code == ADD
    assert ok(ADD).method == "bare"


def test_bare_module_with_prose_before_and_after():
    completion = (
        "Here is an optimized version using a Triton kernel for the row-wise softmax.\n\n"
        f"{SOFTMAX}\n"
        "Explanation:\n"
        "The kernel loads one row per program, subtracts the max for stability, and normalizes.\n"
        "Done")
    assert ok(completion).code == SOFTMAX


def test_bare_module_with_prose_between_parts():
    completion = (
        "We start with the kernel.\n\n"
        f"{KERNEL_ONLY}\n\nNext comes the module that launches it.\n\n{MODEL_ONLY}\n"
        "This should be about 2x faster than the reference.")
    ex = ok(completion)
    assert same_module(ex.code, ADD)


def test_bare_module_with_leading_comment_header():
    code = "# Fused add + ReLU in Triton\n" + ADD
    assert ok(f"Answer:\n{code}").code == code


# --------------------------------------------------------------------------- no code


@pytest.mark.parametrize("completion", ["", "   \n\t\n", "<|im_end|>", "<|endoftext|></s>\n"])
def test_empty_completion(completion):
    ex = extract_code(completion)
    assert ex.code is None and ex.reason == "empty_completion"


def test_none_completion():
    assert extract_code(None).reason == "empty_completion"


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="completion text"):
        extract_code(b"import torch")  # type: ignore[arg-type]


def test_prose_only_is_no_code():
    ex = extract_code("I'm sorry, but I can't write a faster kernel for this operator: cuBLAS is "
                      "already optimal here. You should keep the reference implementation.")
    assert ex.code is None and ex.reason == "no_code"
    assert ex.candidates == 0


def test_only_non_python_blocks_is_no_code():
    ex = extract_code("Run this first:\n\n```bash\npip install triton==3.1.0\n```\n\nand then "
                      "```json\n{\"BLOCK_SIZE\": 1024}\n```\n")
    assert ex.code is None and ex.reason == "no_code"
    assert ex.candidates == 2 and "bash" in ex.detail


# --------------------------------------------------------------------------- property-style


_WORDS = ("the kernel fuses both ops into one pass over memory and masks the tail so any size "
          "works we keep float32 accumulation for accuracy this avoids an extra round trip "
          "through global memory performance should improve noticeably on large inputs").split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 14))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", "!", ":", "."])


def _prose(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 4)):
        lines.append(rng.choice(["", "", _sentence(rng), _sentence(rng) + "  ", "- " + _sentence(rng),
                                 "**Note:** " + _sentence(rng), "### " + _sentence(rng)]))
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(120))
def test_random_prose_and_whitespace_around_a_fenced_module(seed):
    rng = random.Random(seed)
    code = rng.choice(SOLUTIONS)
    fence_open, fence_close = rng.choice([("```python", "```"), ("```py", "```"), ("```", "```"),
                                          ("~~~python", "~~~"), ("```Python", "```"), ("````python", "````")])
    parts = []
    if rng.random() < 0.3:
        parts.append("<think>\n" + _prose(rng) + "\n```python\n" + DRAFT + "```\n" + _prose(rng) + "\n</think>")
    if rng.random() < 0.3:
        parts.append(_prose(rng) + f"\n```python\n{REFERENCE}```")
    parts.append(_prose(rng))
    parts.append(rng.choice(["", "\n", "\n\n", "   \n"]) + fence_open + rng.choice(["", " ", "  "]) + "\n"
                 + rng.choice(["", "\n", "\n\n"]) + code + rng.choice(["", "\n", "\n   \n"]) + fence_close)
    parts.append(_prose(rng))
    if rng.random() < 0.3:
        parts.append(rng.choice(["<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>"]))
    completion = rng.choice(["\n", "\n\n", "\n \n"]).join(parts)
    if rng.random() < 0.3:
        completion = completion.replace("\n", "\r\n")
    completion = rng.choice(["", " ", "\n", "\t\n"]) + completion + rng.choice(["", "\n", "  \n\n"])
    ex = extract_code(completion)
    assert ex.reason == "ok", (seed, ex.detail)
    assert ex.code == code, seed


@pytest.mark.parametrize("seed", range(60))
def test_random_prose_around_a_bare_module(seed):
    rng = random.Random(1000 + seed)
    code = rng.choice(SOLUTIONS)
    completion = _prose(rng) + "\n\n" + code + rng.choice(["", "\n", "\n\n"]) + _prose(rng)
    ex = extract_code(completion)
    assert ex.reason == "ok", (seed, ex.detail)
    assert ex.code == code, seed


def test_think_then_bare_module():
    completion = "<think>\nDraft:\n```python\n" + DRAFT + "```\nToo slow.\n</think>\n\n" + ADD
    ex = ok(completion)
    assert ex.code == ADD and ex.method == "bare"


_TOKENS = ["```", "```python", "```py\n", "~~~", "````", "<think>", "</think>", "<|im_end|>", "</s>",
           "class ModelNew(nn.Module):", "\n", "\n\n", " ", "\t", "import torch", "def f(x):",
           "    return x", "&lt;", "\r\n", "`", "Here is", "@triton.jit", "<|im_start|>assistant\n",
           "\u00a0", ":", "(", "'''", '"""', "#", "1. ", "- "]


@pytest.mark.parametrize("seed", range(300))
def test_random_junk_never_raises(seed):
    rng = random.Random(seed)
    completion = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(0, 60)))
    ex = extract_code(completion)
    assert ex.reason in {"ok", "empty_completion", "no_code", "think_only"}
    if ex.reason == "ok":
        assert ex.code and ex.code.endswith("\n") and ex.code.strip()
    else:
        assert ex.code is None and ex.detail


def test_harmony_channels():
    completion = ("<|channel|>analysis<|message|>User wants relu(x+y). Draft:\n```python\n" + DRAFT +
                  "```\nNeeds Triton.<|end|><|start|>assistant<|channel|>final<|message|>"
                  f"Here is the fused kernel:\n\n```python\n{ADD}```<|return|>")
    assert ok(completion).code == ADD


def test_reference_echo_is_never_merged_in():
    # The model block uses names only the echoed reference defines: no merge, static will see it.
    uses_ref = MODEL_ONLY.replace("return out", "return out if x.numel() > batch_size else Model()(x, y)")
    completion = f"```python\n{REFERENCE}batch_size = 16\n```\n\n```python\n{KERNEL_ONLY}\n```\n\n```python\n{uses_ref}```"
    ex = ok(completion)
    assert ex.method == "merged"
    assert "class Model(" not in ex.code and "add_relu_kernel" in ex.code
