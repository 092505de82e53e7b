"""KernelBench-format parsing, validation and size rewriting (tritonrl_lib.tasks.kb_format)."""

from __future__ import annotations

import difflib

import pytest

from tritonrl_lib.tasks.kb_format import (
    TaskFormatError,
    check_kb_source,
    init_constant_names,
    module_constants,
    parse_kb_source,
    rewrite_constants,
)

GOOD = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Scales then shifts the input.

    Second paragraph, not part of the description.
    """

    def __init__(self, scale: float, shift: float):
        super(Model, self).__init__()
        self.scale, self.shift = scale, shift

    def forward(self, x):
        return x * self.scale + self.shift


batch_size = 16   # rows
dim  =  16384  # odd spacing is kept
scale: float = -0.5
shift = 1e-3
h, w = 32, 24
use_bias = True
label = "not a number"


def get_inputs():
    return [torch.randn(batch_size, dim, h, w)]


def get_init_inputs():
    return [scale, shift]
'''


def test_parse_reads_model_constants_and_names():
    info = parse_kb_source(GOOD, "good.py")
    assert info.init_args == ("scale", "shift")
    assert info.forward_args == ("x",)
    assert info.description == "Scales then shifts the input."
    assert info.constant_values == {"batch_size": 16, "dim": 16384, "scale": -0.5, "shift": 1e-3, "h": 32, "w": 24,
                                    "use_bias": True}
    assert {"batch_size", "dim", "h", "w"} <= info.input_names
    assert init_constant_names(GOOD) == {"scale", "shift"}


def test_rewrite_changes_only_the_numbers():
    new = rewrite_constants(GOOD, {"batch_size": 4, "dim": 100, "scale": 0.25, "h": 3, "w": 5})
    assert module_constants(new) == {"batch_size": 4, "dim": 100, "scale": 0.25, "shift": 1e-3, "h": 3, "w": 5,
                                     "use_bias": True}
    changed = [line for line in difflib.ndiff(GOOD.splitlines(), new.splitlines()) if line[:1] in "+-"]
    assert changed == [
        "- batch_size = 16   # rows", "+ batch_size = 4   # rows",
        "- dim  =  16384  # odd spacing is kept", "+ dim  =  100  # odd spacing is kept",
        "- scale: float = -0.5", "+ scale: float = 0.25",
        "- h, w = 32, 24", "+ h, w = 3, 5",
    ]
    assert rewrite_constants(GOOD, {}) == GOOD


def test_rewrite_rejects_unknown_or_non_numeric_names():
    with pytest.raises(KeyError, match="batchsize"):
        rewrite_constants(GOOD, {"batchsize": 4})
    with pytest.raises(KeyError, match="label"):
        rewrite_constants(GOOD, {"label": 3})


def test_rewrite_handles_non_ascii_text_before_the_value():
    src = GOOD.replace("# rows", "# rows — über").replace("Scales then", "Scales (×) then")
    new = rewrite_constants(src, {"batch_size": 7, "dim": 9})
    assert "batch_size = 7   # rows — über" in new and "dim  =  9  #" in new


@pytest.mark.parametrize(
    "mutate, what, fix",
    [
        (lambda s: s.replace("def forward(self, x):", "def forward(self, x)"), "syntax error at line",
         "py_compile"),
        (lambda s: s.replace("class Model(", "class Reference("), "defines no `class Model`",
         "class Model(nn.Module)"),
        (lambda s: s.replace("def get_inputs():", "def make_inputs():"), "defines no `get_inputs()`",
         "def get_inputs()"),
        (lambda s: s.replace("def get_init_inputs():", "def init_inputs():"), "defines no `get_init_inputs()`",
         "return []"),
        (lambda s: s + "\nget_inputs = [torch.randn(4)]\n", "`get_inputs` is a variable assigned on line",
         "make it a function"),
        (lambda s: s.replace("class Model(nn.Module):", "class Model:"), "does not subclass nn.Module",
         "class Model(nn.Module)"),
        (lambda s: s.replace("def forward(self, x):", "def run(self, x):"), "has no `forward` method",
         "def forward"),
        (lambda s: s.replace("def get_inputs():", "def get_inputs(n):"), "takes required arguments",
         "no parameters"),
    ],
)
def test_malformed_sources_name_file_problem_and_fix(mutate, what, fix):
    src = mutate(GOOD)
    info, problems = check_kb_source(src, "tasks/bad_task.py")
    assert info is None and len(problems) == 1
    with pytest.raises(TaskFormatError) as err:
        parse_kb_source(src, "tasks/bad_task.py")
    msg = str(err.value)
    assert "tasks/bad_task.py" in msg and what in msg and fix in msg
    assert err.value.paths == ["tasks/bad_task.py"]


def test_all_problems_of_one_file_are_reported_together():
    src = GOOD.replace("class Model(", "class Ref(").replace("def get_inputs():", "def inputs():")
    _, problems = check_kb_source(src, "x.py")
    assert [p.what for p in problems] == ["defines no `class Model`", "defines no `get_inputs()`"]


FORMS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return x + y


height = width = 256  # KernelBench's chain form
N = 2048 * 2
K = -(4096 // 2) + 2 ** 3
input_shape = (32768, 8 * 2)
groups = N  # derived: not a constant of its own
huge = 10 ** 10 ** 10


def get_inputs():
    return [torch.rand(N, height, width), torch.rand(N, *input_shape)]


def get_init_inputs():
    return []
'''


def test_constants_in_every_kernelbench_form():
    assert module_constants(FORMS) == {"height": 256, "width": 256, "N": 4096, "K": -2040}
    assert module_constants(FORMS, elements=True) == {"height": 256, "width": 256, "N": 4096, "K": -2040,
                                                      "input_shape[0]": 32768, "input_shape[1]": 16}


def test_rewrite_splits_a_chain_only_when_its_names_differ():
    one = rewrite_constants(FORMS, {"height": 16})
    assert "height = 16; width = 256  # KernelBench's chain form" in one
    assert module_constants(one)["height"] == 16 and module_constants(one)["width"] == 256
    both = rewrite_constants(FORMS, {"height": 8, "width": 8})
    assert "height = width = 8  # KernelBench's chain form" in both
    moved = rewrite_constants(FORMS, {"N": 6, "input_shape[0]": 100})
    assert "N = 6\n" in moved and "input_shape = (100, 8 * 2)" in moved
    assert module_constants(moved, elements=True)["input_shape[1]"] == 16
    assert len(moved.splitlines()) == len(FORMS.splitlines())  # line numbers of tracebacks stay true
    with pytest.raises(KeyError, match="groups"):
        rewrite_constants(FORMS, {"groups": 3})
