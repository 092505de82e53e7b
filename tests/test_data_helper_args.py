"""Level-2 corpus surface (data/templates/helper_args.py, ctor_defaults.py): a launch helper's
parameters named after what forward passes them, and constructors whose trailing chain arguments have
defaults (tuples among them), each copied into ModelNew as written; the examples stay right."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from tritonrl_lib.data.generate import make_candidate
from tritonrl_lib.data.templates import render_example
from tritonrl_lib.data.templates.helper_args import call_name, named_by_call

HELPER_FAMILIES = ("gemm_chain", "conv_chain", "convtranspose_chain", "chain_reduce", "gemm_reduce",
                   "conv_group_norm", "conv_global_pool", "conv_channel_reduce", "gemm_softmax")


def test_call_name_drops_self_and_joins_the_chain():
    assert call_name("self.conv.bias") == "conv_bias"
    assert call_name("self.group_norm.eps") == "group_norm_eps"
    assert call_name("self.scale") == "scale"
    assert call_name("1e-05") is None and call_name("x.bias") is None and call_name("self.w.t()") is None


def test_named_by_call_renames_uses_but_not_keywords_attributes_or_clashes():
    launch = ["eps = float(eps)",
              "k[grid](y, out, heavy_bias, norm_weight, eps, num_groups=num_groups, BLOCK=256)",
              "per_group = y.shape[1] // num_groups",
              "n = out.eps + 1"]
    params, lines = named_by_call(["heavy_bias", "norm_weight", "eps", "num_groups"],
                                  ["self.conv.bias", "self.gn.weight", "self.gn.eps", "self.gn.num_groups"],
                                  launch)
    assert params == ["conv_bias", "gn_weight", "gn_eps", "gn_num_groups"]
    assert lines == ["gn_eps = float(gn_eps)",
                     "k[grid](y, out, conv_bias, gn_weight, gn_eps, num_groups=gn_num_groups, BLOCK=256)",
                     "per_group = y.shape[1] // gn_num_groups",
                     "n = out.eps + 1"]
    # a name the launch already uses (or another parameter has) is never made: the role name stays
    params, lines = named_by_call(["heavy_bias", "w"], ["self.conv.bias", "self.conv.weight"],
                                  ["conv_bias = 1", "k(heavy_bias, w, conv_bias)"])
    assert params == ["heavy_bias", "conv_weight"] and lines == ["conv_bias = 1", "k(heavy_bias, conv_weight, conv_bias)"]


def _helper_calls(solution: str) -> list[tuple[list[str], list[str]]]:
    """(helper parameters after `y`, forward's argument expressions after `y`) of each helper forward calls."""
    tree = ast.parse(solution)
    helpers = {f.name: [a.arg for a in f.args.args] for f in tree.body if isinstance(f, ast.FunctionDef)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            out.append((helpers[node.func.id][1:], [ast.unparse(a) for a in node.args[1:]]))
    return out


def _init_line(source: str, cls: str) -> str:
    lines = source.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"class {cls}("))
    return next(ln for ln in lines[at:] if ln.lstrip().startswith("def __init__("))


def test_every_helper_parameter_is_its_call_expression_named_and_signatures_are_copied_as_written():
    seen = Counter()
    for fam in HELPER_FAMILIES:
        for i in range(1, 41):
            ex = render_example(fam, 0, i)
            for params, exprs in _helper_calls(ex.solution):
                assert len(params) == len(exprs), (fam, i)
                for p, e in zip(params, exprs):
                    if e.startswith("self."):
                        seen["self"] += 1
                        seen["chain"] += e.count(".") > 1
                        assert p == call_name(e), (fam, i, p, e)
            ref_init = _init_line(ex.reference, "Model")
            assert _init_line(ex.solution, "ModelNew") == ref_init.replace("Model", "ModelNew")
            sig = ast.parse(ex.reference).body
            model = next(n for n in sig if isinstance(n, ast.ClassDef) and n.name == "Model")
            init = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            passed = next(f for f in sig if isinstance(f, ast.FunctionDef) and f.name == "get_init_inputs")
            n_passed = len(passed.body[-1].value.elts)
            defaults = init.args.defaults
            if defaults:
                seen["defaults"] += 1
                seen["tuple_default"] += any(isinstance(d, ast.Tuple) for d in defaults)
                # every argument is still passed: a default is never what the module runs with
                assert n_passed == len(init.args.args) - 1, (fam, i)
    assert seen["chain"] >= 30, seen  # attribute chains (`self.conv.bias`) are common, not a corner
    assert 0.15 <= seen["defaults"] / (40 * len(HELPER_FAMILIES)) <= 0.45, seen
    assert seen["tuple_default"] >= 10, seen


def _with_tuple_default_and_chain(fam: str) -> int:
    for i in range(1, 200):
        ex = render_example(fam, 0, i)
        init = _init_line(ex.reference, "Model")
        if "=(" in init.replace(" ", "") and any(e.count(".") > 1 and e.startswith("self.")
                                                  for _, exprs in _helper_calls(ex.solution) for e in exprs):
            return i
    raise AssertionError(f"no {fam} example with a tuple default and a call-named chain parameter")


@pytest.mark.slow
def test_the_verifier_passes_examples_with_tuple_defaults_and_call_named_parameters():
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.verify import VerifierPool

    cands = [make_candidate(fam, 0, _with_tuple_default_and_chain(fam)) for fam in ("conv_chain", "conv_group_norm")]
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        verdicts = pool.map([c.task for c in cands], [c.completion for c in cands], progress=False)
    bad = [(c.task.id, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    assert not bad, bad


def test_the_survey_reads_both_forms_from_the_text():
    from tritonrl_lib.data.templates.survey import helper_params, survey

    counts = survey(120, 0, list(HELPER_FAMILIES))
    assert counts["launch helper's parameters"]["chains named by the call"] > 0
    assert counts["launch helper's parameters"]["chains named otherwise"] == 0
    assert counts["constructor defaults"]["a tuple among them"] > 0 and counts["constructor defaults"]["none"] > 60
    # the role names of before read as what they are
    old = ("def f(y, heavy_bias):\n    return y + heavy_bias\n\n"
           "class ModelNew:\n    def forward(self, x):\n        return f(x, self.conv.bias)\n")
    assert helper_params(old) == "chains named otherwise"
