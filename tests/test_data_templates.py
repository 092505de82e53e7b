"""Op templates: every family of the shared vocabulary renders a well-formed, varied task/solution pair."""

from __future__ import annotations

import ast

import pytest

from tritonrl_lib.data.templates import TEMPLATES, covered_families, missing_families, render_example
from tritonrl_lib.tasks.families import all_families
from tritonrl_lib.tasks.kb_format import check_kb_source
from source_modules import method_statements

FAMILIES = all_families()


def test_every_family_has_a_template():
    assert missing_families() == []
    assert covered_families() == FAMILIES
    assert set(TEMPLATES) == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_renders_kernelbench_task_and_triton_solution(family):
    for index in range(4):
        ex = render_example(family, seed=0, index=index)
        module, problems = check_kb_source(ex.reference, f"{family}/{index}")
        assert not problems, (problems, ex.reference)
        tree = ast.parse(ex.solution)
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        assert classes == ["ModelNew"], ex.solution
        kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef)
                   and any(ast.unparse(d) == "triton.jit" for d in n.decorator_list)]
        assert kernels, ex.solution
        # tutorial style: masked memory access and constexpr block sizes
        assert "tl.constexpr" in ex.solution and "mask" in ex.solution
        assert ex.family == family and ex.dtype in TEMPLATES[family].dtypes


@pytest.mark.parametrize("family", FAMILIES)
def test_model_new_repeats_the_references_signatures_exactly(family):
    """A model learns to copy `def __init__(...)` and `def forward(...)`, defaults and hints as written
    (KernelBench's `stride=2, padding=1` after `bias_shape` was dropped by a model taught to rewrite them)."""
    for index in range(12):
        ex = render_example(family, seed=0, index=index)
        for shown in {ex.reference, ex.prompt_reference}:  # the small reference and the one a prompt shows
            for head in ("    def __init__(", "    def forward("):
                ref = [ln for ln in shown.splitlines() if ln.startswith(head)]
                sol = [ln for ln in ex.solution.splitlines() if ln.startswith(head)]
                assert len(ref) == 1 and sol == ref, (family, index, ref, sol)


def _init_statements(module: str, cls: str) -> list[str]:
    """`cls.__init__`'s statements after `super().__init__()`."""
    return [s for s in method_statements(module, cls, "__init__") if "__init__()" not in s]


# pooling's reference may hold an nn.MaxPool2d module; its solution keeps kernel_size and stride itself
OWN_INIT = {"max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d"}


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in OWN_INIT])
def test_model_new_copies_the_references_whole_init(family):
    """ModelNew keeps every line of the reference's __init__, the activation and loss modules it does not
    call too: a model taught to drop some drops the wrong ones (a module still passed to the launcher)."""
    for index in range(12):
        ex = render_example(family, seed=0, index=index)
        assert _init_statements(ex.solution, "ModelNew") == _init_statements(ex.reference, "Model"), (family, index)


@pytest.mark.parametrize("family", FAMILIES)
def test_launch_helpers_come_before_the_kernels(family):
    """Call order once ModelNew is moved first: forward's call, then the helper it calls, then the kernels."""
    for index in range(8):
        tree = ast.parse(render_example(family, seed=0, index=index).solution)
        fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        jit = [any("jit" in ast.unparse(d) for d in n.decorator_list) for n in fns]
        assert jit == sorted(jit), (family, index, [n.name for n in fns])  # plain defs, then @triton.jit ones


def test_same_seed_same_example_other_index_other_example():
    a = render_example("softmax", 0, 5)
    assert render_example("softmax", 0, 5) == a
    assert render_example("softmax", 1, 5) != a
    assert len({render_example("gelu", 0, i).solution for i in range(12)}) >= 10


def test_styles_vary_names_blocks_launchers_and_docstrings():
    exs = [render_example("relu", 0, i) for i in range(40)]
    sols = [e.solution for e in exs]
    refs = [e.reference for e in exs]
    assert len({e.style.kernel_fmt for e in exs}) >= 4
    assert len({e.style.block for e in exs}) >= 3 and len({e.style.block_size for e in exs}) >= 3
    assert any("lambda meta" in s for s in sols) and any("lambda meta" not in s for s in sols)
    assert any("\ndef " in s.split("class ModelNew")[0].split("@triton.jit")[-1] for s in sols)  # helper launcher
    assert any('"""' in r for r in refs) and any('"""' not in r for r in refs)
    assert any("# " in s for s in sols) and any("# " not in s for s in sols)
    assert len({r.split("def forward(self, ")[1].split(")")[0] for r in refs}) >= 3  # input names
    assert any("F.relu" in r for r in refs) and any("torch.relu" in r for r in refs)


def test_half_precision_appears_only_where_the_template_allows_it():
    dtypes = {render_example("add", 0, i).dtype for i in range(60)}
    assert "float32" in dtypes and dtypes & {"float16", "bfloat16"}
    assert {render_example("gemm_bias_relu", 0, i).dtype for i in range(30)} == {"float32"}


def test_unknown_family_names_the_known_ones():
    with pytest.raises(KeyError, match="no template for op family 'nope'"):
        render_example("nope", 0, 0)


@pytest.mark.slow
def test_a_sample_of_every_family_passes_the_verifier():
    """Two examples per family (the house style and a varied one) through the real verifier."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.verify import VerifierPool

    cands = [make_candidate(f, 0, i) for f in FAMILIES for i in (0, 7)]
    with VerifierPool(load_config("smoke").verify, cache=True, progress=False) as pool:
        verdicts = pool.map([c.task for c in cands], [c.completion for c in cands], progress=False)
    bad = [(c.task.id, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    assert not bad, bad
