"""Level-2 epilogues that reduce (data/templates/reduce_rows.py, reduce_conv.py, reduce_norm.py): a GEMM or a
convolution kept in PyTorch, a chain, a reduction or normaliser and a chain after it in one Triton kernel;
right on the CPU and by the verifier, wrong kernels refused, constructor arguments carried over."""

from __future__ import annotations

import ast
import inspect
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tritonrl_lib.data.split import make_split
from tritonrl_lib.data.templates import TEMPLATES, level_of_family, render_example
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.families import FAMILIES, all_families, category_of
from tritonrl_lib.tasks.kb_format import check_kb_source
from source_modules import import_source

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
    # every kernel can loop over the reduced extent; the loop forms (reduce_common.py) all appear: a pass per
    # statistic, one pass (online maximum and sum, Welford, a tile's reduction added in), one tile behind a flag
    assert all("for start in range(" in s for s in sols)
    assert all(any(re.search(rf"\n +if {flag}:\n", s) for s in sols) for flag in ("ONE_TILE", "SINGLE_TILE", "FITS"))
    for online in ("run_max = tl.full(", "w_m2 += delta", "acc += tl.sum(", "acc = tl.maximum(acc, tl.max(",
                   "fin_sum = fin_sum * tl.exp("):
        assert any(online in s for s in sols), online
    assert any(s.count("for start in range(") == 3 and "\n    if " not in s for s in sols)  # three passes
    assert any("lambda meta" in s for s in sols) and any("grid = (" in s for s in sols)
    assert any("\ndef fused_" in s or "\ndef launch_" in s for s in sols)
    assert any("F.conv" in s for s in sols) and any("F.linear(" in s for s in sols)  # heavy bias in the kernel


@pytest.mark.parametrize("family", NEW)
def test_constructor_arguments_round_trip(family, tmp_path):
    """ModelNew takes the reference's constructor arguments, in order, and builds the same layers from
    them: every submodule (its stride, padding, groups, eps, affine, ...) and every stored constant match,
    and the reference's state_dict loads."""
    import torch

    for index in range(10):
        ex = render_example(family, 0, index)
        ref = import_source(ex.reference, tmp_path / f"ref_{index}.py")
        sol = import_source(ex.solution, tmp_path / f"sol_{index}.py")
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


# ----------------------------------------------------------------------------- sizes: published and beyond

TILE_DIM = 4096  # the most elements a kernel's tile may span along one dim
TILE = 8192  # the most elements of one program's tile (the product of its dims)
GRID_YZ = 65535  # CUDA's limit on a grid's second and third axes
MAX_PUBLISHED = 300_000_000  # elements of a published input plus the heavy op's output


def _constexprs(kernel: ast.FunctionDef) -> list[str]:
    return [a.arg for a in kernel.args.args if a.annotation is not None and ast.unparse(a.annotation) == "tl.constexpr"]


def _launches(reference: str, solution: str, tmp_path: Path, tag: str) -> list[tuple[tuple, dict, dict]]:
    """Every kernel launch ModelNew makes on `reference`'s inputs: (grid, arguments by name, constexprs).
    Modules, parameters and inputs live on the meta device (shapes only: any size costs nothing) and the
    kernel is replaced by a recorder, so what is checked is what the launcher would really pass."""
    import torch

    ref = import_source(reference, tmp_path / f"ref_{tag}.py")
    sol = import_source(solution, tmp_path / f"sol_{tag}.py")
    calls = []

    class Recorder:
        def __init__(self, kernel: ast.FunctionDef):
            self.params = [a.arg for a in kernel.args.args]
            self.consts = _constexprs(kernel)

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                named = dict(zip(self.params, args)) | kwargs
                consts = {k: named[k] for k in self.consts}
                calls.append((tuple(grid(named) if callable(grid) else grid), named, consts))
            return launch

    for kernel in _kernels(solution):
        setattr(sol, kernel.name, Recorder(kernel))
    with torch.device("meta"), torch.no_grad():
        model = sol.ModelNew(*ref.get_init_inputs())
        model(*ref.get_inputs())
    assert calls, solution
    return calls


def _tiles(consts: dict) -> list[int]:
    return [v for v in consts.values() if isinstance(v, int) and not isinstance(v, bool)]


def _grown(ex) -> str:
    """The example's module with every size constant larger: the published twin's 8 times, else the verified
    module's 128 times; past any published size, so a tile sized to a whole extent shows."""
    from tritonrl_lib.tasks.kb_format import module_constants, rewrite_constants

    base = ex.published_reference or ex.reference
    factor = 8 if ex.published_reference else 128
    sizes = {n: v * factor for n, v in module_constants(base).items()
             if n in ex.shape and n != "keepdim" and type(v) is int}
    return rewrite_constants(base, sizes)


def _check_launch(grid: tuple, consts: dict, where: str) -> None:
    tiles = _tiles(consts)
    assert tiles, where
    assert all(t <= TILE_DIM and t & (t - 1) == 0 for t in tiles), (consts, where)
    assert math.prod(tiles) <= TILE, (consts, where)
    assert all(0 < g <= GRID_YZ for g in grid[1:]) and 0 < grid[0] < 2**31, (grid, where)


@pytest.mark.parametrize("family", NEW)
def test_no_tile_grows_with_the_extent_it_reduces(family, tmp_path):
    """Every block the launcher picks is bounded (<= 4096 a dim, <= 8192 elements a program) at the
    published sizes the prompt shows and at sizes 8 times larger again: the kernel loops over the reduced
    extent in tiles instead of holding it whole."""
    checked = 0
    for index in range(30):
        ex = render_example(family, 0, index)
        sources = ([("published", ex.published_reference)] if ex.published_reference else [])
        if not ex.style.inline_dims:  # sizes written into get_inputs stay as they are in a rewrite
            sources.append(("grown", _grown(ex)))
        for tag, source in sources:
            for grid, named, consts in _launches(source, ex.solution, tmp_path, f"{index}_{tag}"):
                _check_launch(grid, consts, f"{family}/{index} at {tag} sizes: {ex.shape}")
                checked += 1
    assert checked >= 25


def _numbers_masked(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            node.value = 0
    return ast.dump(tree)


@pytest.mark.parametrize("family", NEW)
def test_published_twins_are_the_same_module_at_kernelbench_sizes(family, tmp_path):
    """Most drawn examples show the prompt a published-scale twin: the verified module line for line with
    other numbers (the same constructor arguments and inputs, other values), KernelBench's sizes (batch
    16-1024, 512-8192 features, 16-128 output channels, 32x32-128x128 planes, 16x32x32-like volumes), input
    plus the heavy op's output under 300M elements; the verified twin stays small."""
    import torch

    from tritonrl_lib.data.templates.epilogue import (
        CHANNEL_NAMES,
        GEMM_SIZES,
        SPATIAL_NAMES,
    )
    from tritonrl_lib.tasks.kb_format import module_constants, rewrite_constants

    feats = {n for t in GEMM_SIZES for n in t[1:]}
    couts = {t[2] for t in CHANNEL_NAMES}
    batches = {t[0] for t in GEMM_SIZES + CHANNEL_NAMES}
    sides = {n: nd for nd, names in SPATIAL_NAMES.items() for t in names for n in t}
    exs = [render_example(family, 0, i) for i in range(1, 41)]
    pubs = [ex for ex in exs if ex.published_reference]
    assert len(pubs) >= 0.6 * len(exs), family
    for i, ex in enumerate(pubs):
        where = f"{family}: {ex.published_shape}"
        assert not check_kb_source(ex.published_reference)[1], ex.published_reference
        assert _numbers_masked(ex.published_reference) == _numbers_masked(ex.reference), where
        small, large = module_constants(ex.reference), module_constants(ex.published_reference)
        if not ex.style.inline_dims:
            assert set(small) == set(large) and rewrite_constants(ex.reference, large) == ex.published_reference
        assert ex.numel <= 100_000 and ex.published_numel >= 10 * ex.numel, where
        shape = ex.published_shape
        assert set(shape) == set(ex.shape) and shape["chain"] == ex.shape["chain"], where
        for name, value in shape.items():
            if name in feats:
                assert 512 <= value <= 8192, where
            elif name in couts:
                assert 16 <= value <= 128, where
            elif name in batches:
                assert 8 <= value <= 1024, where
        gemm = any(n in feats for n in shape)  # a GEMM's sequence length is named like a 1-D map's
        spatial = [] if gemm else [shape[n] for n in shape if n in sides]
        nd = len(spatial)
        if nd == 1:
            assert 256 <= spatial[0] <= 16384, where
        elif nd == 2:
            assert all(16 <= s <= 256 for s in spatial) and 32 * 32 <= math.prod(spatial) <= 256 * 256, where
        elif nd == 3:
            assert all(4 <= s <= 64 for s in spatial) and 8 * 16 * 16 <= math.prod(spatial) <= 32 * 64 * 64, where
        # the same constructor arguments and inputs, other values
        ref_s = import_source(ex.reference, tmp_path / f"s_{i}.py")
        ref_p = import_source(ex.published_reference, tmp_path / f"p_{i}.py")
        init_s, init_p = ref_s.get_init_inputs(), ref_p.get_init_inputs()
        assert [type(v) for v in init_s] == [type(v) for v in init_p], where
        with torch.device("meta"):
            in_s, in_p = ref_s.get_inputs(), ref_p.get_inputs()
        assert [t.dim() for t in in_s] == [t.dim() for t in in_p] and in_s[0].shape != in_p[0].shape, where
        # input plus the heavy op's output (what the kernel reads) under 300M elements
        calls = _launches(ex.published_reference, ex.solution, tmp_path, f"pub_{i}")
        heavy_out = next(iter(calls[0][1].values()))  # the kernel's first argument
        assert in_p[0].numel() + heavy_out.numel() <= MAX_PUBLISHED, where


# what a family reduces over: the index of its tile among the launch's int constexprs, the extent from the
# kernel's arguments, the constants growing it, and the examples most worth running (several statistics)
REDUCED_TILE = {"gemm_reduce": 0, "gemm_softmax": 0, "conv_channel_reduce": 0, "conv_global_pool": 1,
                "conv_group_norm": 0}
PREFERRED = {"gemm_reduce": r"logsumexp_lastdim", "gemm_softmax": r"(softmax|layer_norm)_lastdim",
             "conv_channel_reduce": r"(softmax|logsumexp)_dim1", "conv_global_pool": r"_spatial -> .*logsumexp_dim1",
             "conv_group_norm": r"norm"}


def _extent(family: str, named: dict) -> int:
    if family.startswith("gemm"):
        return named["n_cols"]
    if family == "conv_channel_reduce":
        return named["channels"]
    if family == "conv_global_pool":
        return named["spatial"]
    return named["channels"] // named["num_groups"] * named["spatial"]


def _looping(ex, tmp_path: Path, tag: str) -> tuple[str, int, int]:
    """The example's verified module with its batch 2 and the extent it reduces doubled until the kernel
    walks it in 3 or more tiles: (that module, the extent, the tile)."""
    from tritonrl_lib.data.templates.epilogue import (
        CHANNEL_NAMES,
        GEMM_SIZES,
        SPATIAL_NAMES,
    )
    from tritonrl_lib.tasks.kb_format import module_constants, rewrite_constants

    consts = module_constants(ex.reference)
    outs = [n for n in consts if n in {t[2] for t in GEMM_SIZES}]
    sides = [n for n in consts if n in {n for names in SPATIAL_NAMES.values() for t in names for n in t}]
    grow = {"conv_channel_reduce": [n for n in consts if n in {t[2] for t in CHANNEL_NAMES}],
            "conv_global_pool": sides, "conv_group_norm": outs or sides}.get(ex.family, outs)
    assert grow, ex.reference
    values = {n: consts[n] for n in grow} | {n: 2 for n in consts if n in {t[0] for t in GEMM_SIZES + CHANNEL_NAMES}}
    for step in range(14):
        source = rewrite_constants(ex.reference, values)
        (_, named, cs), = _launches(source, ex.solution, tmp_path, f"{tag}_{step}")
        tile, extent = _tiles(cs)[REDUCED_TILE[ex.family]], _extent(ex.family, named)
        if extent >= 3 * tile:
            return source, extent, tile
        values |= {n: values[n] * 2 for n in grow}
    raise AssertionError(f"{ex.family}: the extent never grew past 3 tiles")


_LOOP_CHILD = """
import json, sys, types, warnings, torch
warnings.simplefilter("ignore")
bad = []
for case in json.load(open(sys.argv[1])):
    ref, sol = types.ModuleType("ref"), types.ModuleType("sol")
    exec(compile(case["reference"], "ref", "exec"), ref.__dict__)
    exec(compile(case["solution"], "sol", "exec"), sol.__dict__)
    torch.manual_seed(0)
    m = ref.Model(*ref.get_init_inputs())
    new = sol.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(m.state_dict())
    inputs = ref.get_inputs()
    with torch.no_grad():
        a, b = m(*inputs), new(*inputs)
    if not (a.shape == b.shape and torch.allclose(a, b, atol=1e-4, rtol=1e-4)):
        bad.append((case["tag"], float((a - b).abs().max()) if a.shape == b.shape else "shape"))
print("bad", bad)
"""


def test_the_loops_are_right_when_the_extent_spans_several_tiles(tmp_path):
    """Per family and loop form ("fits" past its one tile, "passes", "online"), an example whose reduced
    extent is grown to 3 or more of the tiles the launcher picks (the features to thousands, the channels
    to hundreds, the maps and groups to several thousand positions): ModelNew matches Model on the CPU."""
    import json

    from tritonrl_lib.data.templates.reduce_common import FORMS, loop_form

    cases = []
    for fam in NEW:
        for form in FORMS:
            exs = [ex for ex in (render_example(fam, 0, i) for i in range(1, 200))
                   if loop_form(ex.style) == form and not ex.style.inline_dims]
            ex = next((e for e in exs if re.search(PREFERRED[fam], e.shape["chain"])), exs[0])
            source, extent, tile = _looping(ex, tmp_path, f"{fam}_{form}")
            assert 3 <= extent / tile <= 64, (fam, form, extent, tile)
            cases.append({"tag": f"{fam}/{form}: {ex.shape['chain']} over {extent} in tiles of {tile}",
                          "reference": source, "solution": ex.solution})
    assert len(cases) == 15
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, "-c", _LOOP_CHILD, str(path)], capture_output=True, text=True,
                          timeout=900, check=False, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0 and proc.stdout.strip() == "bad []", (proc.stdout[-2000:], proc.stderr[-3000:])
