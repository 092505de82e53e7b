"""The references' surface and sizes: varied the ways people write PyTorch modules, the published-scale
twin the same module with other constants, 64-bit offsets where a published size passes int32's range."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from tritonrl_lib.data.templates import TEMPLATES, render_example
from tritonrl_lib.data.templates import elementwise, loss, matmul, pooling, rowwise, channel
from tritonrl_lib.data.templates.base import DEFAULT_STYLE, RefSpec, render_reference
from tritonrl_lib.data.templates.scale import INT32_SAFE, block_offsets, expr_numel
from tritonrl_lib.data.templates.surface import inline_candidates, rand_for_randn, shape_of, substitute
from tritonrl_lib.data.templates.survey import classify, survey
from tritonrl_lib.tasks.kb_format import check_kb_source, module_constants, rewrite_constants

# the families of the templates this suite covers (other template files add their own)
OWN = [info.family for m in (elementwise, rowwise, matmul, pooling, loss, channel) for info in m.templates()]
INDICES = range(1, 25)


def _numbers_masked(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            node.value = 0
    return ast.dump(tree)


@pytest.fixture(scope="module")
def examples():
    return [render_example(f, 0, i) for f in OWN for i in INDICES]


def test_published_twin_is_the_verified_module_with_other_constants(examples):
    published = [ex for ex in examples if ex.published_reference]
    assert len(published) > 0.6 * len(examples)
    for ex in published:
        assert not check_kb_source(ex.published_reference)[1], ex.published_reference
        # the same module line for line, but for numbers
        assert _numbers_masked(ex.published_reference) == _numbers_masked(ex.reference), ex.family
        assert ex.published_reference != ex.reference
        small, large = module_constants(ex.reference), module_constants(ex.published_reference)
        if not ex.style.inline_dims:
            # rewriting the verified module's constants to the published values gives the published module
            assert set(small) == set(large)
            assert rewrite_constants(ex.reference, large) == ex.published_reference
        assert ex.published_numel > ex.numel, (ex.family, ex.shape, ex.published_shape)
        assert ex.published_shape and set(ex.published_shape) == set(ex.shape)


def test_published_sizes_reach_benchmark_scale(examples):
    by_family = {}
    for ex in examples:
        if ex.published_reference:
            by_family.setdefault(ex.family, []).append(ex)
    flat = [ex for f in ("relu", "add", "gelu", "sigmoid", "tanh") for ex in by_family.get(f, [])]
    assert max(ex.published_numel for ex in flat) >= 10**9  # elementwise over ~10^9 elements
    sides = [max(ex.published_shape.values()) for ex in by_family["matmul"] + by_family["matmul_rect"]]
    assert max(sides) >= 4096 and min(sides) >= 1024
    assert all(ex.numel <= 10**5 for ex in examples)  # the verified twin stays small


def test_int64_offsets_whenever_the_published_size_passes_int32(examples):
    big = [ex for ex in examples if ex.published_numel >= INT32_SAFE]
    assert len(big) >= 5, "the sample should hold some kernels past 2**31 elements"
    for ex in big:
        assert ".to(tl.int64)" in ex.solution, (ex.family, ex.published_shape, ex.solution)
    flat = [ex for ex in examples if ex.family in {i.family for i in elementwise.templates()}]
    share = sum(".to(tl.int64)" in ex.solution for ex in flat) / len(flat)
    assert 0.3 < share < 0.9  # a good share of styles, beyond the ones that must


def _first_input_dims(source: str) -> list[int]:
    """The sizes of the first tensor get_inputs() draws, read from the module's constants."""
    tree = ast.parse(source)
    values = module_constants(source)
    get_inputs = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    call = next(c for c in ast.walk(get_inputs) if isinstance(c, ast.Call)
                and ast.unparse(c.func) in ("torch.rand", "torch.randn"))
    return [eval(ast.unparse(a), {}, dict(values)) for a in call.args]  # our own generated sizes: `2 * hidden`


def test_row_kernels_scale_rows_not_row_length(examples):
    """A kernel that loads a whole row (or plane) in one block keeps it short at published scale (<= 4096
    elements) and scales the number of rows instead. (The row families' looping kernels, BLOCK =
    min(next_power_of_2(n), CAP), walk rows of any length: tests/test_data_rowwise_long.py.)"""
    row_families = {i.family for i in rowwise.templates()} - {"swiglu"}
    checked = 0
    for ex in examples:
        if not ex.published_reference:
            continue
        dims = _first_input_dims(ex.published_reference)
        one_tile = "= triton.next_power_of_2(" in ex.solution  # not min(triton.next_power_of_2(...), CAP)
        if ex.family in row_families and "BLOCK_R" not in ex.solution and one_tile:  # the row in one block
            row = dims[-2] * dims[-1] if ex.family == "instance_norm" else dims[-1]
            assert row <= 4096, (ex.family, dims)
            assert dims[0] * (dims[1] if len(dims) > 2 else 1) >= 256, (ex.family, dims)  # many rows instead
            checked += 1
        if ex.family in ("max_pool2d", "avg_pool2d", "cross_entropy", "kl_div", "cosine_similarity"):
            assert (dims[-2] * dims[-1] if "pool" in ex.family else dims[-1]) <= 4096, (ex.family, dims)
    assert checked >= 20  # the one-tile form is a minority now


def test_index_zero_is_the_house_style_and_about_fifteen_percent_are():
    for f in OWN:
        ex = render_example(f, 0, 0)
        assert ex.style == DEFAULT_STYLE and ex.published_reference == ""
    counts = survey(300, seed=0, families=OWN)
    assert 0.08 <= counts["house surface (today's style)"]["yes"] / 300 <= 0.22


def test_surface_varies_the_ways_people_write_modules():
    n = 300
    c = survey(n, seed=0, families=OWN)
    share = {k: {v: x / n for v, x in counter.items()} for k, counter in c.items()}
    docs = share["docstring"]
    for kind in ("none", "class one-line", "class block", "Google Args/Returns (typed)", "Args/Returns (untyped)",
                 "NumPy Parameters/Returns", "class block + forward Returns (house)"):
        assert docs.get(kind, 0) >= 0.03, (kind, docs)
    assert max(docs.values()) < 0.35
    assert 0.1 <= share["module docstring"]["yes"] <= 0.3
    assert 0.15 <= share["comments"]["yes"] <= 0.5
    assert 0.1 <= share["constants"]["before the class"] <= 0.35
    assert 0.1 <= share["sizes inline in get_inputs"]["yes"] <= 0.35
    assert 0.2 <= share["get_inputs"]["returns the list directly"] <= 0.6
    assert 0.15 <= share["input draw"]["torch.rand"] <= 0.45
    assert 0.3 <= share["super()"]["super()"] <= 0.7
    assert len(share["type hints"]) >= 3
    assert share["blank lines between blocks"]["one"] >= 0.1
    ops = share["op written as"]
    assert ops["op held as an attribute (self.act = nn.ReLU())"] >= 0.08 and ops["tensor method (x.relu())"] >= 0.05
    assert len(c["forward args"]) >= 20 and len(c["size-constant names"]) >= 40
    assert share["sizes shown"]["published scale"] >= 0.6
    mags = share["largest input, elements"]
    assert mags.get(">=1e9", 0) > 0 and mags.get("1e8-1e9", 0) > 0.05 and mags.get("<1e4", 0) > 0.1


def test_google_and_numpy_docstrings_describe_the_inputs_shapes():
    seen = set()
    for f in ("gemm_bias_relu", "softmax", "mse_loss", "matmul_rect"):
        for i in range(1, 40):
            ex = render_example(f, 0, i)
            kind = classify(ex.reference)["docstring"]
            if kind.startswith(("Google", "NumPy", "Args")):
                seen.add(kind)
                assert "of shape (" in ex.reference and ("Returns" in ex.reference)
                if ex.style.ref_doc == "google" and ex.family == "gemm_bias_relu" and ex.style.phrasing % 4 != 3:
                    assert "(int): Number of input features." in ex.reference
    assert len(seen) == 3


def test_inline_sizes_are_numbers_in_get_inputs_and_no_longer_constants():
    spec = RefSpec(doc="Applies ReLU.", init_params=[], init_lines=[], forward_args=["x"],
                   forward_lines=["return torch.relu(x)"], constants=[("batch_size", 16), ("dim", 64)],
                   inputs=[("x", "torch.randn(batch_size, dim)")], init_inputs=[], published={"dim": 393216})
    style = dataclasses.replace(DEFAULT_STYLE, inline_dims=True, direct_inputs=True)
    small, large = render_reference(spec, style), render_reference(spec, style, published=True)
    assert "return [torch.randn(batch_size, 64)]" in small and "return [torch.randn(batch_size, 393216)]" in large
    assert set(module_constants(small)) == {"batch_size"}
    assert not check_kb_source(small)[1]
    # a constant the model reads is never written inline; `dim=` keywords are not the constant
    assert inline_candidates([("dim", 8), ("n", 4)], ["torch.softmax(torch.randn(n, dim), dim=-1)"],
                             "nn.LayerNorm(dim)") == ["n"]
    assert substitute("torch.softmax(torch.randn(n, dim), dim=-1)", {"dim": 8}) == \
        "torch.softmax(torch.randn(n, 8), dim=-1)"


def test_house_surface_renders_exactly_as_before():
    spec = RefSpec(doc="Applies ReLU.", init_params=[("scale", "float")], init_lines=["self.scale = scale"],
                   forward_args=["x"], forward_lines=["return torch.relu(x) * self.scale"],
                   constants=[("batch_size", 16), ("scale", 2.0)], inputs=[("x", "torch.randn(batch_size)")],
                   init_inputs=["scale"], forward_doc="a tensor.")
    assert render_reference(spec, DEFAULT_STYLE) == (
        'import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    """\n    Applies ReLU.\n    """\n\n'
        "    def __init__(self, scale: float):\n        super(Model, self).__init__()\n        self.scale = scale\n\n"
        '    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        """\n        Returns: a tensor.\n'
        '        """\n        return torch.relu(x) * self.scale\n\n\nbatch_size = 16\nscale = 2.0\n\n\n'
        "def get_inputs():\n    x = torch.randn(batch_size)\n    return [x]\n\n\n"
        "def get_init_inputs():\n    return [scale]\n")


def test_rand_replaces_only_a_plain_randn_draw():
    assert rand_for_randn("torch.randn(a, b)") == "torch.rand(a, b)"
    assert rand_for_randn("torch.randn(a, b, dtype=torch.float16)") == "torch.rand(a, b, dtype=torch.float16)"
    assert rand_for_randn("torch.randn(a) + 0.5") == "torch.randn(a) + 0.5"
    assert rand_for_randn("torch.softmax(torch.randn(a), dim=-1)") == "torch.softmax(torch.randn(a), dim=-1)"
    assert rand_for_randn("torch.rand(a) + 0.5") == "torch.rand(a) + 0.5"  # a positive draw stays positive


def test_sizes_of_input_expressions():
    values = {"batch_size": 16384, "dim": 393216, "hidden": 4096, "n": 10}
    assert expr_numel("torch.randn(batch_size, dim)", values) == 16384 * 393216
    assert expr_numel("torch.randn(batch_size, 2 * hidden, dtype=torch.float16)", values) == 16384 * 8192
    assert expr_numel("torch.randint(0, n, (batch_size,))", values) == 16384
    assert expr_numel("3.14", values) == 0
    assert shape_of("torch.softmax(torch.randn(N, D), dim=-1)") == "(N, D)"
    assert shape_of("torch.randint(0, num_classes, (batch_size,))") == "(batch_size,)"


def test_a_shape_passed_as_one_tuple_is_read_as_its_dimensions():
    # the docstring and the size count read the same dimensions, whichever way the shape is written
    values = {"a": 3, "b": 5, "n": 10}
    for expr in ("torch.rand(a, b)", "torch.rand((a, b))", "torch.randn([a, b])", "torch.zeros((a, b), dtype=torch.float16)"):
        assert shape_of(expr) == "(a, b)", expr
        assert expr_numel(expr, values) == 15, expr
    assert shape_of("torch.randint(n, (a, b))") == "(a, b)"  # randint(high, size)
    assert shape_of("torch.rand((a,))") == "(a,)"
    assert shape_of("3.14") is None and shape_of("x +") is None
    assert expr_numel("torch.randn(a, unknown)", values) == 0


def test_offsets_forms():
    style = dataclasses.replace(DEFAULT_STYLE, int64=True)
    assert block_offsets(DEFAULT_STYLE, "pid", "BLOCK", "offs") == ["offs = pid * BLOCK + tl.arange(0, BLOCK)"]
    assert block_offsets(style, "pid", "BLOCK", "offs") == ["offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)"]
    two = block_offsets(dataclasses.replace(style, phrasing=1), "pid", "BLOCK", "offs")
    assert two == ["block_start = pid.to(tl.int64) * BLOCK", "offs = block_start + tl.arange(0, BLOCK)"]


def _pick(pred, families, indices=range(1, 60)):
    for f in families:
        for i in indices:
            ex = render_example(f, 0, i)
            if pred(ex):
                return f, i
    raise AssertionError("no example has the feature")


@pytest.mark.slow
def test_surface_varied_examples_pass_the_verifier():
    """Examples chosen for what the surface and sizes change (64-bit offsets forced by a published
    size, inline sizes, torch.rand inputs, op modules held as attributes, new names, the loop style
    with int64, every 1D template with int64) through the real verifier at their verified sizes."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.verify import VerifierPool

    picks = {
        _pick(lambda e: e.published_numel >= INT32_SAFE, ["relu", "add", "mul_add_clamp"]),
        _pick(lambda e: e.published_numel >= INT32_SAFE, ["matmul_scalar", "swiglu"]),
        _pick(lambda e: e.style.int64 and e.style.loop, ["gelu", "scale_bias_tanh"]),
        _pick(lambda e: classify(e.reference)["sizes inline in get_inputs"] == "yes", ["matmul_rect", "bmm"]),
        _pick(lambda e: e.style.rand and "torch.rand(" in e.reference, ["layer_norm", "cumsum"]),
        _pick(lambda e: "nn.Softmax(" in e.reference, ["softmax"]),
        _pick(lambda e: "nn.MSELoss(" in e.reference or "nn.L1Loss(" in e.reference, ["mse_loss", "l1_loss"]),
        _pick(lambda e: "nn.CrossEntropyLoss(" in e.reference, ["cross_entropy"]),
        _pick(lambda e: "self.relu = nn.ReLU()" in e.reference, ["gemm_bias_relu", "matmul_add_relu_residual"]),
        _pick(lambda e: re.search(r"def forward\(self, input\b", e.reference), ["relu", "sigmoid", "tanh"]),
        _pick(lambda e: e.style.int64 and "atomic_add" in e.solution, ["mse_loss", "hinge_loss"]),
        _pick(lambda e: e.style.int64, ["batch_norm", "conv2d_hardswish"]),
        _pick(lambda e: e.style.int64, ["group_norm_relu", "conv2d_bias_relu"]),
        _pick(lambda e: e.style.int64, ["instance_norm", "avg_pool2d"]),
    }
    cands = [make_candidate(f, 0, i) for f, i in sorted(picks)]
    with VerifierPool(load_config("smoke").verify, cache=True, progress=False) as pool:
        verdicts = pool.map([c.task for c in cands], [c.completion for c in cands], progress=False)
    bad = [(c.task.id, c.variant, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    assert not bad, bad


def test_every_family_renders_valid_references_at_both_sizes():
    for f in TEMPLATES:
        for i in (1, 5, 9):
            ex = render_example(f, 3, i)
            for source in (ex.reference, ex.prompt_reference):
                assert not check_kb_source(source)[1], (f, i, source)
