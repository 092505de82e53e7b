"""Level-2 epilogue chains (data/templates/epilogue.py, epilogue_reduce.py): a GEMM or convolution kept in
PyTorch, a random chain of cheap ops (and a reduction) in one Triton kernel, right on the CPU and by the
verifier."""

from __future__ import annotations

import ast
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tritonrl_lib.data.generate import make_candidate
from tritonrl_lib.data.split import make_split
from tritonrl_lib.data.templates import TEMPLATES, level_of_family, render_example
from tritonrl_lib.data.templates.epilogue import OPS
from tritonrl_lib.data.templates.reduce_common import FLAGS
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.families import FAMILIES, all_families, category_of
from tritonrl_lib.tasks.kb_format import check_kb_source
from source_modules import method_statements

NEW = ["gemm_chain", "matmul_chain", "conv_chain", "convtranspose_chain", "chain_reduce"]
HEAVY = re.compile(r"nn\.(Linear|Conv\dd|ConvTranspose\dd)\(|torch\.(matmul|mm)\(| @ ")
# PyTorch compute a solution's forward must not keep: everything of the chain goes to Triton
CHAIN_CALLS = re.compile(r"torch\.(relu|sigmoid|tanh|clamp|sum|mean|max|amax|logsumexp|add|mul|sub|div|where|exp)\(|"
                         r"\bF\.(relu|gelu|silu|mish|elu|selu|leaky_relu|hardtanh|hardswish|hardsigmoid|softplus|"
                         r"adaptive_avg_pool\dd)\(")


REDUCTION = re.compile(r"sum|mean|max|min|logsumexp|softmax|norm|pool|amax|amin|flatten")


def _forward(module: str, cls: str) -> list[str]:
    return method_statements(module, cls, "forward")


def test_the_families_are_level_2_in_their_own_category_with_templates():
    assert FAMILIES["level2"]["epilogue_chain"] == tuple(NEW)
    for fam in NEW:
        assert fam in all_families(2) and category_of(fam) == "epilogue_chain" and level_of_family(fam) == 2
        assert TEMPLATES[fam].dtypes == ("float32",)  # learned weights: the reference runs in fp32


def test_the_split_holds_out_a_whole_chain_family_and_trains_on_the_rest():
    suite = load_tasks("builtin", size="small")
    for seed in range(4):
        s = make_split(seed, 0.25, suite)
        side = s.by_category["epilogue_chain"]
        assert sorted(side["train"] + side["heldout"]) == sorted(NEW) and len(side["heldout"]) == 1
        assert sorted(s.train_families + s.heldout_families) == sorted(all_families())


@pytest.mark.parametrize("family", NEW)
def test_examples_keep_the_heavy_op_and_launch_one_kernel_for_the_rest(family):
    for index in range(12):
        ex = render_example(family, seed=0, index=index)
        _, problems = check_kb_source(ex.reference, f"{family}/{index}")
        assert not problems, (problems, ex.reference)
        assert HEAVY.search(ex.reference), ex.reference
        sol = ast.parse(ex.solution)
        kernels = [n for n in sol.body if isinstance(n, ast.FunctionDef)
                   and any(ast.unparse(d) == "triton.jit" for d in n.decorator_list)]
        assert len(kernels) == 1, ex.solution  # the whole chain (and its reduction) in one kernel
        kernel = ast.unparse(kernels[0])
        assert "tl.int64" in kernel and "tl.float32" in kernel, kernel  # 64-bit offsets, fp32 math
        assert ".to(tl.float32)" in kernel and "mask" in kernel and "tl.constexpr" in ex.solution
        fwd = "\n".join(_forward(ex.solution, "ModelNew"))
        helpers = "\n".join(ast.unparse(n) for n in sol.body if isinstance(n, ast.FunctionDef) and n not in kernels)
        assert not CHAIN_CALLS.search(fwd + "\n" + helpers), fwd + helpers
        first = _forward(ex.reference, "Model")[0]  # the reference starts with its one heavy call
        assert len(re.findall(r"self\.\w+\(|torch\.(?:matmul|mm)\(| @ ", first)) == 1, first


@pytest.mark.parametrize("family", NEW + list(FAMILIES["level2"]["reduce_epilogue"]))
def test_the_kernel_writes_each_chain_line_of_the_reference_above_its_translation(family):
    """Every line of the reference's forward after the heavy call (the reductions and norms too, and a
    reduction written in the return line; not the residual's `.clone()` nor a bare `return x`) comes back as
    a comment in the kernel, in order, each just above code of its own block; once, in the first pass over
    the tiles, however many passes recompute the chain: a "fits" kernel's two branches carry it each."""
    flag_line = re.compile(rf"if ({'|'.join(FLAGS)}):")
    traced = 0
    for seed, index in [(0, i) for i in range(16)] + [(3, i) for i in range(16)]:
        ex = render_example(family, seed=seed, index=index)
        fwd = _forward(ex.reference, "Model")
        chain = [ln for ln in fwd[1:] if ".clone()" not in ln and not re.fullmatch(r"return \w+", ln)]
        raw = ex.solution.splitlines()

        def is_trace(ln: str) -> bool:
            return ln.strip().startswith("# ") and _unparsed(ln.strip()[2:]) in fwd

        def traced_in(part: list[str]) -> list[str]:
            return [_unparsed(ln.strip()[2:]) for ln in part if is_trace(ln)]

        for i, ln in enumerate(raw):
            if is_trace(ln):
                nxt = raw[i + 1]
                assert _indent(nxt) == _indent(ln) and not nxt.strip().startswith(("#", "tl.store", "else:", "if ")), \
                    (family, seed, index, ln, nxt)
        flag = next((i for i, ln in enumerate(raw) if flag_line.fullmatch(ln.strip())), None)
        if flag is None:
            assert traced_in(raw) == chain, (family, seed, index, ex.solution)
        else:  # the one-tile branch and the loop branch carry the same trace; around them, the rest
            ind = _indent(raw[flag])
            other = next(i for i in range(flag + 1, len(raw)) if raw[i].strip() == "else:" and _indent(raw[i]) == ind)
            end = next((i for i in range(other + 1, len(raw)) if raw[i].strip() and _indent(raw[i]) <= ind), len(raw))
            one_tile, loop = traced_in(raw[flag:other]), traced_in(raw[other:end])
            assert one_tile and one_tile == loop, (family, seed, index, ex.solution)
            assert traced_in(raw[:flag] + raw[other:]) == chain, (family, seed, index, ex.solution)
        traced += len(chain) > 1
    assert traced >= 16, (family, traced)  # most examples draw a chain (reduce families: 0-3 ops before it)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unparsed(line: str) -> str:
    """A source line as `ast.unparse` writes it (`x /= d` stays; quotes normalised), or itself."""
    try:
        return ast.unparse(ast.parse(line).body[0])
    except SyntaxError:
        return line


def test_chains_vary_ops_forms_heavy_ops_and_reductions():
    refs = {fam: [render_example(fam, 0, i) for i in range(60)] for fam in NEW}
    chains = Counter(op for fam in NEW for ex in refs[fam] for op in ex.shape["chain"].split(" -> "))
    assert set(OPS) | {"residual_add"} <= set(chains), set(OPS) - set(chains)
    assert {"sum_dim1", "mean_dim1", "max_dim1", "logsumexp_dim1", "global_avg_pool"} <= set(chains)
    lengths = Counter(len(ex.shape["chain"].split(" -> ")) for fam in NEW[:4] for ex in refs[fam])
    assert set(lengths) >= {1, 2, 3, 4, 5}
    text = "\n".join(ex.reference for exs in refs.values() for ex in exs)
    for form in ("nn.ReLU()", "torch.relu(", "F.relu(", ".relu()", "F.hardtanh(", "torch.clamp(", "F.gelu(",
                 ".clone().detach()", "nn.Conv1d(", "nn.Conv2d(", "nn.Conv3d(", "nn.ConvTranspose2d(",
                 "nn.ConvTranspose3d(", "nn.Linear(", "torch.matmul(", "stride=", "padding=", "bias_shape",
                 "torch.logsumexp(", "F.adaptive_avg_pool", "keepdim=True"):
        assert form in text, form
    sols = "\n".join(ex.solution for exs in refs.values() for ex in exs)
    assert "% n_cols" in sols and "// spatial) % channels" in sols  # per-feature and per-channel parameters
    assert "F.conv" in sols and "F.linear(" in sols  # the heavy op's bias moved into the kernel, sometimes


# Whether Triton's helpers run under the interpreter is fixed when triton is first imported: every CPU
# check runs in a fresh process with TRITON_INTERPRET=1, as the verifier's candidates do.
_CHILD = """
import pickle, sys
from tritonrl_lib.tasks.check_suite import check_task
tasks = pickle.load(open(sys.argv[1], "rb"))
out = []
for t in tasks:
    try:
        r = check_task(t)
        out.append((t.id, r.ok, r.failures, sorted({l.kernel for l in r.launches})))
    except Exception as e:
        out.append((t.id, False, [repr(e)], []))
pickle.dump(out, open(sys.argv[2], "wb"))
"""


@pytest.mark.slow
def test_solutions_match_their_references_on_the_cpu():
    """Reference and solution run side by side in the Triton interpreter (original values, values x2,
    another seed, eval mode, doubled sizes): every example of every family matches."""
    tasks = [make_candidate(fam, 3, i).task for fam in NEW for i in range(4)]
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "tasks.pkl", Path(d) / "out.pkl"
        src.write_bytes(pickle.dumps(tasks))
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(dst)], capture_output=True, text=True,
                              env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=900, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = pickle.loads(dst.read_bytes())
    bad = [(tid, why) for tid, ok, why, _ in results if not ok]
    assert not bad, bad
    assert all(len(kernels) == 1 for *_, kernels in results)


@pytest.mark.slow
def test_the_verifier_passes_them_under_the_fusion_policy():
    """Two examples per family through the real verifier (Level 2: the heavy call may stay in PyTorch,
    no more of them than the reference makes; the rest must be Triton)."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.verify import VerifierPool

    cands = [make_candidate(fam, 0, i) for fam in NEW for i in (0, 9)]
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        verdicts = pool.map([c.task for c in cands], [c.completion for c in cands], progress=False)
    bad = [(c.task.id, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    assert not bad, bad
    assert all(v.stage == "full" and not v.cheat_flags for v in verdicts)
