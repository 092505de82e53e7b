"""SFT records for tests and benchmarks, in exactly the form 01_data writes (`paths.sft_train`).

`toy_sft_records`: short element-wise tasks with real Triton solutions (a few hundred tokens),
small enough for the tiny model's context. `builtin_sft_records`: the built-in tasks' prompts and
reference solutions, cut to token lengths drawn from a spread like real SFT data, for throughput
measurements. Neither is training data for a real run; 01_data makes that.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from ...core.jsonio import write_jsonl
from ...model.prompts import SYSTEM_PROMPT, format_completion, user_message
from ...tasks import load_builtin
from ...tasks.task import Task

# name -> (torch expression of x, Triton expression of x)
_TOY_OPS = {
    "relu": ("torch.relu(x)", "tl.maximum(x, 0.0)"),
    "square": ("x * x", "x * x"),
    "negate": ("-x", "-x"),
    "sigmoid": ("torch.sigmoid(x)", "1.0 / (1.0 + tl.exp(-x))"),
    "abs": ("torch.abs(x)", "tl.abs(x)"),
    "double": ("x * 2.0", "x * 2.0"),
    "shift": ("x + 1.0", "x + 1.0"),
    "exp": ("torch.exp(x)", "tl.exp(x)"),
}

_TOY_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {torch_expr}


batch_size = {batch}
dim = {dim}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

_TOY_SOLUTION = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):{doc}
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {triton_expr}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = out.numel()
        grid = (triton.cdiv(n_elements, {block}),)
        {name}_kernel[grid](x, out, n_elements, BLOCK_SIZE={block})
        return out
'''

# Optional kernel docstrings: they spread the examples' lengths, as real data is spread.
_TOY_DOCS = [
    "",
    "Element-wise {name}: one program handles BLOCK_SIZE consecutive elements.",
    "Element-wise {name} over a flat view of the input.\n\n    Each program loads one block of BLOCK_SIZE "
    "elements, masks the tail\n    past n_elements, applies the operation in registers and stores the\n    "
    "result; the launcher sizes the grid with triton.cdiv so every\n    element is covered exactly once.",
]


def _record(task: Task, solution: str, level: int, variant: str) -> dict[str, Any]:
    return {
        "id": f"{task.origin}/{task.op_family}/{hashlib.sha256((task.source + solution).encode()).hexdigest()[:12]}",
        "task_id": task.id, "origin": task.origin, "op_family": task.op_family, "category": task.category,
        "level": level,
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_message(task)}],
        "completion": [{"role": "assistant", "content": format_completion(solution)}],
        "source": task.source, "solution": solution, "variant": variant, "verified": False,
    }


def toy_sft_records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` short element-wise examples (varied op, shape and block size), deterministic from `seed`."""
    rng = random.Random(seed)
    names = sorted(_TOY_OPS)
    out = []
    for i in range(n):
        name = names[i % len(names)] if i < len(names) else rng.choice(names)
        torch_expr, triton_expr = _TOY_OPS[name]
        batch, dim, block = rng.choice([4, 16, 64]), rng.choice([128, 1000, 4096]), rng.choice([256, 1024])
        source = _TOY_SOURCE.format(torch_expr=torch_expr, batch=batch, dim=dim)
        task = Task(id=f"toy/{name}/{batch}x{dim}", level=1, name=name, source=source, op_family=name,
                    category="elementwise", origin="generated")
        doc = rng.choice(_TOY_DOCS)
        solution = _TOY_SOLUTION.format(name=name, triton_expr=triton_expr, block=block,
                                        doc=f'\n    """{doc.format(name=name)}"""' if doc else "")
        out.append(_record(task, solution, 1, f"shape={batch}x{dim} block={block} doc={bool(doc)}"))
    return out


def builtin_sft_records(n: int, tokenizer, seed: int = 0, min_tokens: int = 256,
                        max_tokens: int = 1024) -> list[dict[str, Any]]:
    """`n` examples from the built-in tasks and their reference solutions, each cut (at a line of the
    solution) to a total length drawn uniformly from [min_tokens, max_tokens] tokens of `tokenizer`'s
    chat template, the spread real SFT data has. Cut solutions are realistic text, not working code."""
    tasks = [t for t in load_builtin("full") if t.reference_solution]
    if not tasks:
        raise RuntimeError("the built-in suite has no task with a reference solution")
    rng = random.Random(seed)

    def length(rec: dict[str, Any]) -> int:
        text = tokenizer.apply_chat_template(rec["prompt"] + rec["completion"], tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        target = rng.randint(min_tokens, max_tokens)
        lines = task.reference_solution.strip("\n").splitlines()
        lo, hi = 1, len(lines)
        best = _record(task, "\n".join(lines[:1]), task.level, "cut=1")
        while lo <= hi:  # the longest prefix of the solution that fits the target
            mid = (lo + hi) // 2
            rec = _record(task, "\n".join(lines[:mid]), task.level, f"cut={mid}")
            if length(rec) <= target:
                best, lo = rec, mid + 1
            else:
                hi = mid - 1
        out.append(best)
    return out


def write_records(path: str | Path, records: list[dict[str, Any]]) -> Path:
    write_jsonl(path, records)
    return Path(path)

