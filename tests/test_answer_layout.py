"""SFT's answer layout: `ModelNew` moved ahead of its kernels only where the program stays the same."""

from __future__ import annotations

import ast

import pytest

from tritonrl_lib.core.config import ConfigError, RunConfig, validate
from tritonrl_lib.core.jsonio import write_jsonl
from tritonrl_lib.core.paths import RunPaths
from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.model.answer_layout import laid_out, model_first, relaid_completion
from tritonrl_lib.model.prompts import build_messages, format_completion
from tritonrl_lib.tasks.loaders import load_tasks
from tritonrl_lib.train.rl.best_of_n import replay_rows
from tritonrl_lib.train.sft.train import load_sft_dataset
from tritonrl_lib.verify.pool import VerifierPool

KERNEL_FIRST = '''"""A module docstring."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE = 2.0


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


def launch(x, s):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), s, BLOCK=256)
    return out


# the module the task asks for
class ModelNew(nn.Module):
    """Scales by a constant."""

    def __init__(self, factor: float = 1.0):
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return launch(x, self.factor * SCALE)
'''


def _top_names(code: str) -> list[str]:
    return [getattr(n, "name", type(n).__name__) for n in ast.parse(code).body]


def test_model_new_moves_after_the_imports_and_the_program_is_the_same():
    moved = model_first(KERNEL_FIRST)
    assert _top_names(moved) == ["Expr", "Import", "Import", "Import", "Import", "ModelNew", "Assign",
                                 "scale_kernel", "launch"]
    assert moved.index("# the module the task asks for\nclass ModelNew") < moved.index("SCALE = 2.0")
    assert "\n\n\n\n" not in moved and moved.endswith("\n")
    # the same statements, only reordered
    assert sorted(ast.dump(n) for n in ast.parse(moved).body) == sorted(ast.dump(n) for n in ast.parse(KERNEL_FIRST).body)
    assert model_first(moved) == moved  # already first


@pytest.mark.parametrize("change", [
    # what the class statement evaluates reads a name defined after the imports
    ("    def __init__(self, factor: float = 1.0):", "    def __init__(self, factor: float = SCALE):"),  # a default
    ("    def __init__(self, factor: float = 1.0):", "    def __init__(self, *, factor: float = SCALE):"),  # kw-only
    ("    def forward(self, x: torch.Tensor) -> torch.Tensor:", "    def forward(self, x: Tensor) -> torch.Tensor:"),
    ("    def forward(self, x: torch.Tensor) -> torch.Tensor:", "    def forward(self, x: torch.Tensor) -> Tensor:"),
    ("class ModelNew(nn.Module):", "class ModelNew(Base):"),  # a base
    ("class ModelNew(nn.Module):", "class ModelNew(nn.Module, metaclass=Meta):"),  # a class keyword
    ("class ModelNew(nn.Module):", "@register\nclass ModelNew(nn.Module):"),  # a class decorator
    ("    def forward(self, x", "    @traced\n    def forward(self, x"),  # a method decorator
    # ... or could do more than read names
    ('    """Scales by a constant."""', "    block = 256"),  # a class-level statement
    ("    def __init__(self, factor: float = 1.0):", "    def __init__(self, factor=(lambda: 1.0)()):"),
    ("    def __init__(self, factor: float = 1.0):", "    def __init__(self, factor=torch.tensor(1.0)):"),  # a call
    ("    def __init__(self, factor: float = 1.0):", "    def __init__(self, factor=[i for i in (1.0,)][0]):"),
    # ... or what it moves ahead of binds or reads what it reads, or does more than define and assign
    ("SCALE = 2.0", "SCALE = 2.0\nnn = None"),  # an imported name rebound
    ("SCALE = 2.0", "SCALE = 2.0\nfloat = int"),  # a builtin shadowed
    ("SCALE = 2.0", "SCALE = 2.0\nModelNew = None"),  # ModelNew bound before the class
    ("SCALE = 2.0", "SCALE = 2.0\nOLD = globals().get('ModelNew')"),  # ... or looked up
    ("SCALE = 2.0", "SCALE = 2.0\ntorch.set_default_dtype(torch.float64)"),  # a bare call
    ("SCALE = 2.0", "SCALE = 2.0\nclass Helper(nn.Module):\n    pass"),  # another class (subclass order)
    ("SCALE = 2.0", "SCALE = 2.0\nnn.Module.flag = True"),  # an attribute assigned
    ("SCALE = 2.0", "SCALE = 2.0\nimport math"),  # an import (its module's code runs)
])
def test_a_class_that_could_tell_the_orders_apart_stays_put(change):
    code = KERNEL_FIRST.replace(*change)
    assert code != KERNEL_FIRST and model_first(code) == code
    ast.parse(code)  # every case is a valid module


def test_text_the_move_would_alter_is_caught_by_the_statement_check():
    """Blank-line runs are collapsed where the class left its gap; inside a string that would change the
    program, and the before/after statement comparison keeps the module as it was."""
    code = KERNEL_FIRST.replace("SCALE = 2.0", 'NOTE = """a\n\n\n\n\nb"""\nSCALE = 2.0')
    assert model_first(code) == code
    deep = KERNEL_FIRST.replace("SCALE = 2.0", "SCALE = " + "+".join(["1"] * 3000))
    assert model_first(deep) == deep  # too deep for ast: left as it is, no RecursionError


def test_postponed_annotations_let_the_class_move_and_odd_modules_are_left_alone():
    lazy = "from __future__ import annotations\n" + KERNEL_FIRST.split('"""A module docstring."""\n')[1].replace(
        "x: torch.Tensor)", "x: Tensor)")
    assert _top_names(model_first(lazy))[5] == "ModelNew"
    assert model_first("def broken(:\n") == "def broken(:\n"
    no_model = KERNEL_FIRST.replace("class ModelNew", "class Other")
    assert model_first(no_model) == no_model
    twice = KERNEL_FIRST + "\n\nclass ModelNew(nn.Module):\n    pass\n"
    assert model_first(twice) == twice  # the later definition wins: order matters


def test_completions_are_relaid_only_when_they_are_the_data_stages_own():
    sol = KERNEL_FIRST
    plain = format_completion(sol)
    assert relaid_completion(plain, sol, "model_first") == format_completion(model_first(sol))
    assert relaid_completion(plain, sol, "as_written") == plain
    led = format_completion(sol, "Here it is.")
    assert relaid_completion(led, sol, "model_first") == led  # someone's own record: kept
    assert relaid_completion(plain, "", "model_first") == plain
    assert relaid_completion("```python\n   \n```", "   ", "model_first") == "```python\n   \n```"
    with pytest.raises(ValueError, match="model_first, as_written"):
        relaid_completion(plain, sol, "kernels_last")
    rec = {"completion": [{"role": "assistant", "content": plain}], "solution": sol}
    assert laid_out(rec, "model_first")[0]["content"].startswith("```python\n\"\"\"A module docstring")
    assert laid_out({"completion": rec["completion"]}, "model_first") == rec["completion"]


def test_the_setting_is_checked():
    cfg = RunConfig()
    assert cfg.sft.answer_layout == "model_first"
    cfg.sft.answer_layout = "model-first"
    with pytest.raises(ConfigError, match="did you mean 'model_first'"):
        validate(cfg)


@pytest.fixture(scope="module")
def builtin_pairs():
    """(task, solution) for three built-in tasks with solutions: two Level 1, one Level 2 fusion."""
    tasks = {t.id: t for t in load_tasks("builtin") if t.reference_solution}
    ids = ["builtin/L1/relu", "builtin/L1/softmax", "builtin/L2/conv2d_bias_relu"]
    return [(tasks[i], tasks[i].reference_solution) for i in ids]


def test_sft_and_replay_rows_take_the_layout(tmp_path, builtin_pairs):
    paths = RunPaths(tmp_path)
    paths.sft_train.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": t.id, "op_family": t.op_family, "prompt": build_messages(t),
             "completion": [{"role": "assistant", "content": format_completion(s)}], "solution": s}
            for t, s in builtin_pairs]
    write_jsonl(paths.sft_train, rows)
    firsts = {r["completion"][0]["content"] for r in load_sft_dataset(paths, 10, 0, "model_first")}
    assert firsts == {format_completion(model_first(s)) for _, s in builtin_pairs}
    assert all(c.index("class ModelNew") < c.index("@triton.jit") for c in firsts)
    assert {r["completion"][0]["content"] for r in load_sft_dataset(paths, 10, 0)} == \
        {format_completion(s) for _, s in builtin_pairs}
    replayed = replay_rows(paths.sft_train, 3, seed=0, layout="model_first")
    assert {r["completion"][0]["content"] for r in replayed} == firsts


def test_relaid_solutions_still_pass_the_verifier(builtin_pairs):
    """The reordering is the same program: the verifier, run for real, says so."""
    relaid = [model_first(s) for _, s in builtin_pairs]
    assert all(r != s for r, (_, s) in zip(relaid, builtin_pairs))
    with VerifierPool(VerifyConfig(timeout_s=120), workers=2, progress=False) as pool:
        verdicts = pool.map([t for t, _ in builtin_pairs], [format_completion(r) for r in relaid])
    assert [(v.correct, v.reason) for v in verdicts] == [(True, "ok")] * 3, [v.error for v in verdicts]


def test_fingerprints_follow_the_layout_and_adapters_trained_before_it_still_match(tmp_path):
    """An SFT adapter depends on the layout of what it was trained on; best-of-N too where it replays the
    corpus. `as_written` is the order every adapter had before the setting: their fingerprints stay."""
    from tritonrl_lib.train.rl.run_frame import fingerprint as rl_fingerprint
    from tritonrl_lib.train.sft.train import fingerprint as sft_fingerprint

    data = tmp_path / "sft_train.jsonl"
    data.write_text("{}\n")
    cfg = RunConfig()
    first = sft_fingerprint(cfg, data, 1)
    assert first["sft"]["answer_layout"] == "model_first"
    cfg.sft.answer_layout = "as_written"
    written = sft_fingerprint(cfg, data, 1)
    assert "answer_layout" not in written["sft"] and written != first

    start = tmp_path / "no-adapter"
    cfg.rl.replay_ratio = 1.0
    plain = rl_fingerprint(cfg, "best_of_n", start, ["a"])
    assert "answer_layout" not in plain["train"]
    cfg.sft.answer_layout = "model_first"
    assert rl_fingerprint(cfg, "best_of_n", start, ["a"])["train"]["answer_layout"] == "model_first"
    assert "answer_layout" not in rl_fingerprint(cfg, "grpo", start, ["a"])["train"]  # GRPO replays nothing
    cfg.rl.replay_ratio = 0.0
    assert "answer_layout" not in rl_fingerprint(cfg, "best_of_n", start, ["a"])["train"]
