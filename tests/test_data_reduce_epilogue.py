"""Level-2 epilogues that reduce (data/templates/reduce_rows.py, reduce_conv.py, reduce_norm.py): a GEMM or a
convolution kept in PyTorch, a chain, a reduction or normaliser and a chain after it in one Triton kernel;
right on the CPU and by the verifier, wrong kernels refused, constructor arguments carried over."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from tritonrl_lib.data.split import make_split
from tritonrl_lib.data.templates import TEMPLATES, level_of_family, render_example
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.families import FAMILIES, all_families, category_of
from tritonrl_lib.tasks.kb_format import check_kb_source

NEW = ["gemm_reduce", "gemm_softmax", "conv_channel_reduce", "conv_global_pool", "conv_group_norm"]
HEAVY = re.compile(r"nn\.(Linear|Conv\dd|ConvTranspose\dd)\(|torch\.(matmul|mm)\(| @ ")
# what the reference reduces or normalises with
REDUCTION = re.compile(r"\b(sum|mean|amax|amin|max|min|logsumexp|norm|vector_norm|softmax|log_softmax|normalize|"
                       r"layer_norm|group_norm|instance_norm|adaptive_(avg|max)_pool\dd)\(|nn\.(LayerNorm|GroupNorm|"
                       r"InstanceNorm\dd|Softmax|LogSoftmax|Adaptive(Avg|Max)Pool\dd)\(")
# PyTorch compute a solution's forward must not keep: all of it after the heavy op goes to Triton
TORCH_COMPUTE = re.compile(r"torch\.(relu|sigmoid|tanh|clamp|sum|mean|max|min|amax|amin|logsumexp|softmax|"
                           r"log_softmax|norm|add|mul|sub|div|where|exp)\(|\bF\.(relu|gelu|silu|mish|elu|selu|"
                           r"leaky_relu|hardtanh|hardswish|hardsigmoid|softplus|softmax|log_softmax|normalize|"
                           r"layer_norm|group_norm|instance_norm|adaptive_(avg|max)_pool\dd)\(|"
                           r"\.(sum|mean|amax|max|min|logsumexp|softmax|norm)\(|self\.\w*(norm|ln|gn)\w*\(")


def _forward(module: str, cls: str) -> list[str]:
    node = next(n for n in ast.parse(module).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    return [ast.unparse(s) for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]


def _kernels(solution: str) -> list[ast.FunctionDef]:
    return [n for n in ast.parse(solution).body if isinstance(n, ast.FunctionDef)
            and any(ast.unparse(d) == "triton.jit" for d in n.decorator_list)]


def test_the_families_are_level_2_in_their_own_category_with_templates():
    assert FAMILIES["level2"]["reduce_epilogue"] == tuple(NEW)
    for fam in NEW:
        assert fam in all_families(2) and category_of(fam) == "reduce_epilogue" and level_of_family(fam) == 2
        assert TEMPLATES[fam].dtypes == ("float32",)  # learned weights: the reference runs in fp32


def test_the_split_holds_out_one_of_them_and_trains_on_the_rest():
    suite = load_tasks("builtin", size="small")
    assert {t.op_family for t in suite} >= set(NEW)  # a built-in task each, so a held-out one is measurable
    for seed in range(4):
        side = make_split(seed, 0.25, suite).by_category["reduce_epilogue"]
        assert sorted(side["train"] + side["heldout"]) == sorted(NEW) and len(side["heldout"]) == 1


@pytest.mark.parametrize("family", NEW)
def test_examples_keep_the_heavy_op_and_launch_one_kernel_for_the_rest(family):
    for index in range(12):
        ex = render_example(family, seed=0, index=index)
        _, problems = check_kb_source(ex.reference, f"{family}/{index}")
        assert not problems, (problems, ex.reference)
        ref_fwd = _forward(ex.reference, "Model")
        assert HEAVY.search(ex.reference) and len(re.findall(r"self\.\w+\(|torch\.(?:matmul|mm)\(| @ ",
                                                              ref_fwd[0])) == 1, ref_fwd
        assert REDUCTION.search("\n".join(ref_fwd[1:]) + ex.reference), ex.reference
        kernels = _kernels(ex.solution)
        assert len(kernels) == 1, ex.solution  # the chains and the reduction in one kernel
        kernel = ast.unparse(kernels[0])
        assert "tl.int64" in kernel and ".to(tl.float32)" in kernel and "mask" in kernel, kernel
        sol = ast.parse(ex.solution)
        helpers = "\n".join(ast.unparse(n) for n in sol.body if isinstance(n, ast.FunctionDef)
                            and n.name != kernels[0].name)
        fwd = "\n".join(_forward(ex.solution, "ModelNew")[1:])  # after the heavy call
        assert not TORCH_COMPUTE.search(fwd + "\n" + helpers), fwd + helpers


def test_reductions_forms_and_kernel_shapes_vary():
    exs = {fam: [render_example(fam, 0, i) for i in range(80)] for fam in NEW}
    labels = Counter(op for fam in NEW for ex in exs[fam] for op in ex.shape["chain"].split(" -> "))
    for what in ("sum", "mean", "max", "min", "logsumexp", "norm"):
        assert f"{what}_lastdim" in labels and f"{what}_dim1" in labels, what
    for what in ("softmax", "log_softmax", "center", "max_sub", "l2norm", "layer_norm"):
        assert f"{what}_lastdim" in labels, what
    assert {"softmax_dim1", "log_softmax_dim1", "center_dim1", "max_sub_dim1", "mean_spatial", "max_spatial",
            "sum_spatial", "group_norm", "instance_norm"} <= set(labels)
    after = [ex for fam in NEW for ex in exs[fam] if not re.search(r"(_lastdim|_dim1|_spatial|_norm)$",
                                                                     ex.shape["chain"])]
    assert len(after) > 100  # ops after the reduction, not only before it
    text = "\n".join(ex.reference for fam in NEW for ex in exs[fam])
    for form in ("keepdim=True", "dim=-1", "dim=1", "torch.logsumexp(", ".max(dim=", "torch.amin(", "torch.norm(",
                 "F.softmax(", "nn.Softmax(dim=1)", "nn.LogSoftmax(", "F.normalize(", "nn.LayerNorm(", "F.layer_norm(",
                 "torch.mean(", "F.adaptive_avg_pool2d(", "nn.AdaptiveMaxPool", ".flatten(2)", "torch.amax(",
                 "nn.GroupNorm(num_groups", "F.group_norm(", "nn.InstanceNorm", "F.instance_norm(", "affine=",
                 "eps=eps", "nn.Linear(", "torch.matmul(", "nn.Conv1d(", "nn.Conv3d(", "nn.ConvTranspose2d(",
                 "nn.ConvTranspose3d(", "stride=stride", "output_padding=", "_shape"):
        assert form in text, form
    sols = [ex.solution for fam in NEW for ex in exs[fam]]
    assert any("for start in range(" in s for s in sols) and any("for start in range(" not in s for s in sols)
    assert any("lambda meta" in s for s in sols) and any("grid = (" in s for s in sols)
    assert any("\ndef fused_" in s or "\ndef launch_" in s for s in sols)
    assert any("F.conv" in s for s in sols) and any("F.linear(" in s for s in sols)  # heavy bias in the kernel


def _module(src: str, path: Path) -> types.ModuleType:
    """`src` imported from a file (triton.jit reads a kernel's source from its file)."""
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("family", NEW)
def test_constructor_arguments_round_trip(family, tmp_path):
    """ModelNew takes the reference's constructor arguments, in order, and builds the same layers from
    them: every submodule (its stride, padding, groups, eps, affine, ...) and every stored constant match,
    and the reference's state_dict loads."""
    import torch

    for index in range(10):
        ex = render_example(family, 0, index)
        ref = _module(ex.reference, tmp_path / f"ref_{index}.py")
        sol = _module(ex.solution, tmp_path / f"sol_{index}.py")
        init = ref.get_init_inputs()
        want = list(inspect.signature(ref.Model.__init__).parameters)[1:]
        assert list(inspect.signature(sol.ModelNew.__init__).parameters)[1:] == want and len(init) == len(want)
        torch.manual_seed(0)
        m, new = ref.Model(*init), sol.ModelNew(*init)
        mods = dict(new.named_modules())
        for name, mod in m.named_modules():
            if name and not isinstance(mod, (torch.nn.Softmax, torch.nn.LogSoftmax)) and list(mod.parameters()):
                assert repr(mods[name]) == repr(mod), (name, ex.reference)
        for key, value in vars(m).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not key.startswith("_"):
                assert getattr(new, key) == value, (key, ex.reference)
        assert {k: v.shape for k, v in m.state_dict().items()} == {k: v.shape for k, v in new.state_dict().items()}
        new.load_state_dict(m.state_dict())
        for arg, value in zip(want, init):  # the KernelBench constants reach the layers
            if arg in ("stride", "padding", "output_padding"):
                heavy = next(mod for mod in m.modules() if isinstance(mod, torch.nn.modules.conv._ConvNd))
                assert set(getattr(heavy, arg)) == {value}, (arg, ex.reference)
            if arg == "num_groups" and "nn.GroupNorm" in ex.reference:
                assert next(mod for mod in m.modules() if isinstance(mod, torch.nn.GroupNorm)).num_groups == value


_CHILD = """
import sys, types, warnings, torch
warnings.simplefilter("ignore")
from tritonrl_lib.data.templates import render_example
bad = []
for arg in sys.argv[1:]:
    fam, index = arg.split(":")
    ex = render_example(fam, 0, int(index))
    ref, sol = types.ModuleType("ref"), types.ModuleType("sol")
    exec(compile(ex.reference, "ref", "exec"), ref.__dict__)
    exec(compile(ex.solution, "sol", "exec"), sol.__dict__)
    torch.manual_seed(0)
    m = ref.Model(*ref.get_init_inputs())
    new = sol.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(m.state_dict())
    inputs = ref.get_inputs()
    with torch.no_grad():
        a, b = m(*inputs), new(*inputs)
    if not (a.shape == b.shape and torch.allclose(a, b, atol=1e-4, rtol=1e-4)):
        bad.append(arg)
print("bad", bad)
"""


def test_solutions_match_their_references_on_the_cpu():
    """Under Triton's interpreter, in a fresh process (the interpreter is chosen at triton's import)."""
    args = [f"{fam}:{i}" for fam in NEW for i in range(8)]
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=600,
                          check=False, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0 and proc.stdout.strip() == "bad []", (proc.stdout[-2000:], proc.stderr[-3000:])


# ----------------------------------------------------------------------------- the verifier


def _drop_op(solution: str) -> str | None:
    """The solution without one op of its chain (a constant or learned scale, shift or division), in every
    pass over the tiles."""
    m = re.search(r"^[ \t]+y = y [-+*/] [A-Za-z_][\w.]*$", solution, re.MULTILINE)
    if m is None:
        return None
    op = m.group(0).strip()
    return "\n".join(ln for ln in solution.split("\n") if ln.strip() != op)


def _short_extent(family: str, solution: str) -> str:
    """The solution reducing over one element too few (a mask off by one, every pass alike)."""
    pattern = {"gemm_reduce": r"(feat < n_cols)", "gemm_softmax": r"(feat < n_cols)",
               "conv_channel_reduce": r"(ch < channels)", "conv_global_pool": r"(cols < spatial)",
               "conv_group_norm": r"(\w+ < group_len)"}[family]
    return re.sub(pattern, r"\1 - 1", solution)


def _wrong_dim(family: str, solution: str) -> str | None:
    """The solution reducing over another dim than the reference's."""
    if family == "gemm_reduce":
        return solution.replace("n_cols = y.shape[-1]", "n_cols = y.shape[0]")
    if family == "conv_channel_reduce":  # the channels and the spatial extent swapped in the launch
        return re.sub(r"(\[grid\]\(.*?)channels, spatial", r"\1spatial, channels", solution)
    return None


def _sensitive(family: str, start: int):
    """A candidate of `family` whose reduction reads every element it reduces (a sum, mean, logsumexp,
    softmax, norm: not a max or min, which one element more or less rarely changes)."""
    from tritonrl_lib.data.generate import make_candidate

    for i in range(start, start + 60):
        c = make_candidate(family, 0, i)
        labels = c.task.description.split(" -> ")
        if not any(re.match(r"(max|min|max_sub)_", label) for label in labels):
            return c
    raise AssertionError(f"no example of {family} reduces with a sum or a mean")


@pytest.mark.slow
def test_the_verifier_passes_them_and_refuses_broken_ones():
    """Three examples per family through the real verifier (Level 2: the heavy call may stay in PyTorch);
    then solutions with one chain op dropped, the reduction one element short, or the reduction over
    another dim than the reference's: every one refused."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.model.prompts import format_completion
    from tritonrl_lib.verify import VerifierPool

    cands = [make_candidate(fam, 0, i) for fam in NEW for i in (0, 5, 9)]
    broken = []
    for fam in NEW:
        dropped = next(c for c in (make_candidate(fam, 0, i) for i in range(1, 60))
                       if _drop_op(c.task.reference_solution))
        broken.append((dropped, _drop_op(dropped.task.reference_solution)))
        short = _sensitive(fam, 20)
        broken.append((short, _short_extent(fam, short.task.reference_solution)))
        wrong = _sensitive(fam, 40)
        if _wrong_dim(fam, wrong.task.reference_solution) is not None:
            broken.append((wrong, _wrong_dim(fam, wrong.task.reference_solution)))
    assert all(s != c.task.reference_solution for c, s in broken)
    tasks = [c.task for c in cands] + [c.task for c, _ in broken]
    sols = [c.completion for c in cands] + [format_completion(s) for _, s in broken]
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        verdicts = pool.map(tasks, sols, progress=False)
    good = verdicts[: len(cands)]
    bad = [(c.task.id, v.reason, v.error[-300:]) for c, v in zip(cands, good) if not v.correct]
    assert not bad, bad
    assert all(v.stage == "full" and not v.cheat_flags for v in good)
    passed = [(c.task.name, v.reason) for (c, _), v in zip(broken, verdicts[len(cands):]) if v.correct]
    assert not passed, passed
