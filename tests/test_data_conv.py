"""Level-1 convolution templates (data/templates/conv.py): direct convolutions written in Triton, right
on the CPU and by the verifier, with no torch convolution left in the solution."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
import types

import pytest

from tritonrl_lib.data.templates import TEMPLATES, level_of_family, render_example
from tritonrl_lib.data.templates.base import DEFAULT_STYLE
from tritonrl_lib.data.templates.conv import KINDS, render_conv
from tritonrl_lib.tasks.families import FAMILIES, category_of
from tritonrl_lib.tasks.kb_format import check_kb_source
from source_modules import import_source

CONV = list(FAMILIES["level1"]["convolution"])
TORCH_CONV = re.compile(r"\b(F|nn\.functional|torch)\.conv(_transpose)?\dd\(|torch\.convolution|"
                        r"self\.\w+\((x|inp|input_tensor|y)\)")


def _forward(module: str, cls: str) -> str:
    node = next(n for n in ast.parse(module).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    return "\n".join(ast.unparse(s) for s in fn.body)


def _init(module: str, cls: str) -> list[str]:
    """The statements of `cls.__init__` after super().__init__() (docstrings left out)."""
    node = next(n for n in ast.parse(module).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    return [ast.unparse(s) for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) and "super" not in ast.unparse(s)]


def _settings(ex) -> set[str]:
    """What an example exercises beyond a plain convolution."""
    ref, out = ex.reference, set()
    if re.search(r"kernel_size = \(", ref):
        out.add("asymmetric")
    for name in ("stride", "padding", "dilation", "groups", "output_padding"):
        m = re.search(rf"{name}=(\d+)", ref) or re.search(rf"^{name} = (\d+)$", ref, re.MULTILINE)
        if m and int(m.group(1)) > (0 if "padding" in name else 1):
            out.add(name)
    return out


def test_the_category_is_level_1_and_every_family_has_a_template():
    assert set(CONV) == set(KINDS) and len(CONV) >= 7
    for fam in CONV:
        assert category_of(fam) == "convolution" and level_of_family(fam) == 1
        assert TEMPLATES[fam].dtypes == ("float32",)  # learned weights: the reference runs in fp32


@pytest.mark.parametrize("family", CONV)
def test_examples_keep_the_parameters_and_compute_in_triton(family):
    forms = set()
    for index in range(10):
        ex = render_example(family, 0, index)
        _, problems = check_kb_source(ex.reference, f"{family}/{index}")
        assert not problems, (problems, ex.reference)
        fwd = _forward(ex.solution, "ModelNew")
        assert not TORCH_CONV.search(fwd), fwd  # no torch conv, no call of the conv module itself
        assert "[grid](" in ex.solution or "[grid](" in fwd and "tl.static_range" in ex.solution
        # the solution holds the reference's parameters: its constructor is the reference's
        assert _init(ex.solution, "ModelNew") == _init(ex.reference, "Model")
        forms.add("F." in ex.reference)
    if family != "conv_depthwise_separable2d":
        assert forms == {True, False}  # nn.ConvNd held as a module, and F.convNd with Parameters


def test_settings_vary_across_examples():
    seen = set()
    for fam in ("conv1d", "conv2d", "conv3d", "conv_transpose2d"):
        for index in range(30):
            seen |= _settings(render_example(fam, 0, index))
    assert {"asymmetric", "stride", "padding", "dilation", "groups", "output_padding"} <= seen


def test_published_sizes_stay_kernelbench_like_and_bounded():
    for fam in CONV:
        pubs = [ex for ex in (render_example(fam, 0, i) for i in range(1, 30)) if ex.published_reference]
        assert pubs, fam
        for ex in pubs:
            assert ex.numel <= 20_000  # what the verifier runs
            assert 10_000 <= ex.published_numel <= 300_000_000, (fam, ex.published_shape)


def _cases() -> list[tuple[str, int]]:
    """Per family: the house example and two drawn ones, one with an asymmetric kernel, stride > 1,
    padding, dilation or groups > 1 where the family has them."""
    out = []
    for fam in CONV:
        picked = [0]
        for index in range(1, 40):
            if len(picked) == 3:
                break
            s = _settings(render_example(fam, 0, index))
            if (len(picked) == 1 and s) or (len(picked) == 2 and s - _settings(render_example(fam, 0, picked[1]))):
                picked.append(index)
        picked += [i for i in (1, 2, 3) if i not in picked][: 3 - len(picked)]  # pointwise: no settings to vary
        out += [(fam, i) for i in picked]
    return out


CASES = _cases()


_CHILD = """
import sys, types, torch
from tritonrl_lib.data.templates import render_example
for arg in sys.argv[1:]:
    fam, index = arg.split(":")
    ex = render_example(fam, 0, int(index))
    ref, sol = types.ModuleType("ref"), types.ModuleType("sol")
    exec(compile(ex.reference, "ref", "exec"), ref.__dict__)
    exec(compile(ex.solution, "sol", "exec"), sol.__dict__)
    torch.manual_seed(0)
    m = ref.Model(*ref.get_init_inputs())
    new = sol.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(m.state_dict())  # the same parameters, by name and shape
    inputs = ref.get_inputs()
    a, b = m(*inputs), new(*inputs)
    assert a.shape == b.shape and torch.allclose(a, b, atol=1e-4, rtol=1e-4), (arg, (a - b).abs().max())
print("ok")
"""


def test_solutions_match_the_reference_on_the_cpu():
    """Under Triton's interpreter, in a fresh process (the interpreter is chosen at triton's import)."""
    args = [f"{f}:{i}" for f, i in (("conv1d", 1), ("conv2d", 2), ("conv_transpose1d", 3), ("conv_transpose2d", 1),
                                     ("conv_depthwise2d", 1), ("conv_pointwise2d", 2))]
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_the_kernels_are_direct_convolutions():
    for fam, nd in (("conv3d", 3), ("conv_transpose2d", 2)):
        sol = render_example(fam, 0, 0).solution
        assert sol.count("tl.static_range(") == nd  # one loop per kernel dim, unrolled
        assert "for ci in range(" in sol or "for c in range(C_in)" in sol  # a runtime loop over input channels
        assert "other=0.0" in sol  # padding: masked loads of zeros
    assert "% STRIDE_" in render_example("conv_transpose1d", 0, 0).solution  # gather form
    tiled = [render_conv("conv2d", __import__("random").Random(s), "float32",
                         dataclasses.replace(DEFAULT_STYLE, variant=1)) for s in range(6)]
    assert any("BLOCK_CO" in ex.solution for ex in tiled)  # a block of output channels per program


@pytest.mark.slow
def test_a_sample_of_every_conv_family_passes_the_verifier_and_a_broken_one_does_not():
    """House style plus two drawn examples per family through the real verifier (Level-1 strict
    policy: the static check refuses any torch convolution); then solutions with the padding, the
    stride or the bias ignored must be rejected."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.model.prompts import format_completion
    from tritonrl_lib.verify import VerifierPool
    from tritonrl_lib.verify.static import static_check

    cands = [make_candidate(f, 0, i) for f, i in CASES]
    for c in cands:
        report = static_check(c.task.reference_solution, "strict", c.task.source)
        assert report.ok, (c.task.name, report.reason, report.detail)
        assert not static_check(c.task.source.replace("class Model(", "class ModelNew("), "strict").ok
    broken = []
    for c in cands:
        sol = c.task.reference_solution
        if "padding" in _settings_of(c.task.source):
            broken.append((c, re.sub(r"PAD_(\w)=pad_\w", r"PAD_\1=0", sol)))
        elif "stride" in _settings_of(c.task.source):
            broken.append((c, re.sub(r"STRIDE_(\w)=stride_\w", r"STRIDE_\1=1", sol)))
        if len(broken) == 2:
            break
    assert broken and all(b != c.task.reference_solution for c, b in broken)
    tasks = [c.task for c in cands] + [c.task for c, _ in broken]
    sols = [c.completion for c in cands] + [format_completion(b) for _, b in broken]
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        verdicts = pool.map(tasks, sols, progress=False)
    good = verdicts[: len(cands)]
    bad = [(c.task.name, v.reason, v.error[-300:]) for c, v in zip(cands, good) if not v.correct]
    assert not bad, bad
    assert not any(v.correct for v in verdicts[len(cands):]), [v.reason for v in verdicts[len(cands):]]


def _settings_of(reference: str) -> set[str]:
    return _settings(types.SimpleNamespace(reference=reference))


# --------------------------------------------------------------------------- KernelBench's constructor


def _ctor(module: str, cls: str) -> tuple[list[str], list[str], int]:
    """(`cls.__init__`'s parameter names, its defaults as written, how many get_init_inputs() returns)."""
    tree = ast.parse(module)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    names = [a.arg for a in init.args.args[1:]]
    defaults = [ast.unparse(d) for d in init.args.defaults]
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_init_inputs"), None)
    arity = len(fn.body[-1].value.elts) if fn is not None else -1
    return names, defaults, arity


def _kernelbench_ctor(module: str) -> bool:
    """Trailing constructor parameters with defaults, and a get_init_inputs() passing fewer than all."""
    names, defaults, arity = _ctor(module, "Model")
    return bool(defaults) and arity < len(names)


def _init_line(module: str) -> str:
    return next(ln for ln in module.splitlines() if ln.strip().startswith("def __init__("))


@pytest.mark.parametrize("family", CONV)
def test_about_half_the_examples_write_kernelbench_constructor_with_defaults(family):
    """KernelBench's Level-1 convolutions take `stride: int = 1, padding: int = 0, ..., bias: bool = False`
    and pass only a prefix in get_init_inputs(); a model that never saw that wrote a ModelNew whose
    constructor missed `stride`, `padding` and `bias` (TypeError at construction) or read a `dilation` it
    had no parameter for (NameError)."""
    examples = [render_example(family, 0, i) for i in range(30)]
    kernelbench = [ex for ex in examples if _kernelbench_ctor(ex.reference)]
    no_defaults = [ex for ex in examples if not _ctor(ex.reference, "Model")[1]]
    assert len(kernelbench) >= 8 and len(no_defaults) >= 8, (len(kernelbench), len(no_defaults))
    for ex in kernelbench:
        names, defaults, _ = _ctor(ex.reference, "Model")
        assert names[-1] == "bias" and defaults[-1] == "False", names
        order = [n for n in ("stride", "padding", "output_padding", "dilation", "groups", "bias") if n in names]
        assert names[len(names) - len(defaults):] == order  # every setting defaulted, in KernelBench's order
        # the solution's constructor takes the same parameters with the same defaults
        assert _ctor(ex.solution, "ModelNew")[:2] == (names, defaults)
    if family.startswith("conv_transpose"):  # KernelBench's transposed ones mostly take output_padding
        assert any("output_padding" in _ctor(ex.reference, "Model")[0] for ex in kernelbench)


@pytest.mark.parametrize("family", CONV)
def test_kernelbench_constructors_build_from_a_prefix_and_from_every_argument(family, tmp_path):
    """ModelNew(*get_init_inputs()) builds, and so does a call passing the defaults of the rest too."""
    examples = [ex for ex in (render_example(family, 0, i) for i in range(20)) if _kernelbench_ctor(ex.reference)]
    assert examples
    for k, ex in enumerate(examples[:4]):
        ref, sol = import_source(ex.reference, tmp_path / f"ref_{k}.py"), import_source(ex.solution, tmp_path / f"sol_{k}.py")
        init = list(ref.get_init_inputs())
        names, defaults, _ = _ctor(ex.reference, "Model")
        rest = [ast.literal_eval(d) for d in defaults][len(defaults) - (len(names) - len(init)):]
        for args in (init, init + rest):
            m, new = ref.Model(*args), sol.ModelNew(*args)
            assert {k: v.shape for k, v in m.state_dict().items()} == {k: v.shape for k, v in new.state_dict().items()}


@pytest.mark.parametrize("family", CONV)
def test_the_published_twin_keeps_the_constructor(family):
    """The prompt's twin is the verified module with other sizes: the same signature, the same prefix."""
    twins = [ex for ex in (render_example(family, 0, i) for i in range(1, 30)) if ex.published_reference]
    for ex in twins:
        assert _init_line(ex.published_reference) == _init_line(ex.reference)
        assert _ctor(ex.published_reference, "Model")[2] == _ctor(ex.reference, "Model")[2]
    assert sum(_kernelbench_ctor(ex.published_reference) for ex in twins) >= 3


@pytest.mark.slow
def test_kernelbench_constructors_verify_and_a_wrong_default_does_not():
    """Three examples per family with defaulted parameters left out of get_init_inputs() through the real
    verifier on the CPU: the omitted arguments take the same defaults on both sides. A solution whose
    default for an omitted setting differs from the reference's is rejected."""
    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.model.prompts import format_completion
    from tritonrl_lib.verify import VerifierPool

    cands = []
    for fam in CONV:
        cands += [c for c in (make_candidate(fam, 0, i) for i in range(1, 40)) if _kernelbench_ctor(c.task.source)][:3]
    assert len(cands) == 3 * len(CONV)
    broken = []
    for c in cands:  # a setting the prefix leaves out, with another default in ModelNew only
        names, defaults, arity = _ctor(c.task.source, "Model")
        omitted = [n for n in names[arity:] if n in ("padding", "stride")]
        if omitted:
            line = _init_line(c.task.reference_solution)
            wrong = re.sub(rf"\b{omitted[0]}(: \w+)?( ?= ?)(\(?)(\d)", lambda m: m.group(0)[:-1] + str(int(m.group(4)) + 1),
                           line, count=1)
            assert wrong != line, line
            broken.append((c, c.task.reference_solution.replace(line, wrong)))
        if len(broken) == 2:
            break
    assert len(broken) == 2
    tasks = [c.task for c in cands] + [c.task for c, _ in broken]
    sols = [c.completion for c in cands] + [format_completion(b) for _, b in broken]
    with VerifierPool(VerifyConfig(timing="off", reference_cache_mb=0), cache=False, progress=False, device="cpu",
                      workers=2) as pool:
        verdicts = pool.map(tasks, sols, progress=False)
    bad = [(c.task.name, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    assert not bad, bad
    assert not any(v.correct for v in verdicts[len(cands):]), [v.reason for v in verdicts[len(cands):]]
