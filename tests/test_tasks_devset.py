"""The development set (tritonrl_lib/tasks/devset/): hand-written KernelBench-format tasks used to
choose SFT settings, written apart from the SFT data generator and from KernelBench.

Every task file is a valid KernelBench module (`check_kb_source`), runs on the CPU at its manifest's
"small" sizes (import, build, forward, finite outputs), and fits one GPU at its own sizes (counted on
the meta device, nothing allocated). The manifest and the files agree. A few reference solutions, the
fastest under the Triton interpreter, go through the real verifier (slow).
"""

from __future__ import annotations

import ast
import json
import time
import types
from collections import Counter
from pathlib import Path

import pytest
import torch

from tritonrl_lib.tasks.kb_format import (
    check_kb_source,
    module_constants,
    rewrite_constants,
)
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify import VerifierPool

DEVSET = Path(__file__).resolve().parent.parent / "tritonrl_lib" / "tasks" / "devset"
MANIFEST = DEVSET / "manifest.json"
CATEGORIES = {
    1: {"elementwise", "activation", "reduction", "softmax", "normalization", "matmul", "pooling", "cumulative",
        "loss"},
    2: {"gemm_epilogue", "conv_epilogue", "reduction_chain"},
}
MAX_ELEMENTS = 256 * 2**20  # inputs + outputs + weights at the task's own sizes: one GPU, seconds
MAX_SMALL_INPUT_ELEMENTS = 1 << 18  # the "small" preset is for the interpreter
# verified in the slow test: the fastest solutions under the interpreter, three categories and both levels
VERIFIED = ("softmax_wide", "mse_loss", "rms_norm", "matmul_bias_silu_div")


def _entries() -> list[dict]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))["tasks"]


ENTRIES = _entries()


def _load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(f"devset_{name}")
    exec(compile(source, f"<devset {name}>", "exec"), module.__dict__)  # noqa: S102 -- our own task files
    return module


def _small_task(entry: dict) -> Task:
    source = rewrite_constants((DEVSET / entry["file"]).read_text(encoding="utf-8"), entry["small"], entry["file"])
    return Task(id=entry["id"], level=entry["level"], name=entry["name"], source=source,
                category=entry["category"], origin="devset", description=entry["description"],
                reference_solution=(DEVSET / entry["solution"]).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the manifest


def test_manifest_matches_the_files():
    files = {p.relative_to(DEVSET).as_posix() for p in DEVSET.glob("level*/*.py")}
    solutions = {p.relative_to(DEVSET).as_posix() for p in DEVSET.glob("solutions/level*/*.py")}
    listed = [e["file"] for e in ENTRIES]
    assert len(listed) == len(set(listed)), "a task file is listed twice"
    assert set(listed) == files, (f"unlisted: {sorted(files - set(listed))}; "
                                  f"listed but missing: {sorted(set(listed) - files)}")
    listed_solutions = {e["solution"] for e in ENTRIES if e["solution"]}
    assert listed_solutions == solutions, (f"unlisted solutions: {sorted(solutions - listed_solutions)}; "
                                           f"missing: {sorted(listed_solutions - solutions)}")
    names = [e["name"] for e in ENTRIES]
    assert len(names) == len(set(names)), "task names must be unique across levels"
    for e in ENTRIES:
        assert {"id", "name", "level", "category", "description", "file", "solution", "small"} <= set(e), e
        assert e["file"] == f"level{e['level']}/{e['name']}.py", e
        assert e["id"] == f"devset/L{e['level']}/{e['name']}", e
        assert e["solution"] in (None, f"solutions/level{e['level']}/{e['name']}.py"), e
        assert e["category"] in CATEGORIES[e["level"]], \
            f"{e['name']}: {e['category']} is no Level {e['level']} category"
        assert e["description"].strip() and "\n" not in e["description"], e["name"]
        source = (DEVSET / e["file"]).read_text(encoding="utf-8")
        unknown = set(e["small"]) - set(module_constants(source))
        assert not unknown, f"{e['name']}: 'small' names no constant of the file: {sorted(unknown)}"


def test_the_set_covers_both_levels_and_every_category():
    per_level = Counter(e["level"] for e in ENTRIES)
    assert per_level[1] >= 30 and per_level[2] >= 12, per_level
    seen = {(e["level"], e["category"]) for e in ENTRIES}
    assert {(lvl, c) for lvl, cats in CATEGORIES.items() for c in cats} <= seen
    with_solution = [e for e in ENTRIES if e["solution"]]
    assert len(with_solution) >= 16
    assert {e["level"] for e in with_solution} == {1, 2}
    assert len({e["category"] for e in with_solution}) >= 10
    assert set(VERIFIED) <= {e["name"] for e in with_solution}


# --------------------------------------------------------------------------- the tasks


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_task_is_valid_fits_a_gpu_and_runs_small_on_the_cpu(entry):
    path = DEVSET / entry["file"]
    source = path.read_text(encoding="utf-8")
    info, problems = check_kb_source(source, str(path))
    assert not problems, "\n".join(map(str, problems))
    assert info is not None and info.forward_args

    # its own sizes, counted on the meta device (nothing is allocated)
    full = _load(source, entry["name"])
    torch.manual_seed(0)
    with torch.device("meta"):
        inputs = full.get_inputs()
        model = full.Model(*full.get_init_inputs())
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    n_in = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    total = n_in + sum(t.numel() for t in outs) + sum(p.numel() for p in model.parameters())
    assert 4096 <= n_in and total <= MAX_ELEMENTS, f"{entry['name']}: {n_in} input and {total} elements in all"

    # the "small" preset: build and run it for real on the CPU
    small = _load(rewrite_constants(source, entry["small"], entry["file"]), entry["name"])
    torch.manual_seed(0)
    inputs = small.get_inputs()
    assert sum(t.numel() for t in inputs if isinstance(t, torch.Tensor)) <= MAX_SMALL_INPUT_ELEMENTS
    model = small.Model(*small.get_init_inputs()).eval()
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    assert outs and all(isinstance(t, torch.Tensor) for t in outs)
    for t in outs:
        assert torch.isfinite(t.float()).all(), f"{entry['name']}: non-finite output at the small sizes"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["solution"]],
                         ids=[e["name"] for e in ENTRIES if e["solution"]])
def test_solution_defines_modelnew_with_the_task_arguments_and_a_triton_kernel(entry):
    info, problems = check_kb_source((DEVSET / entry["file"]).read_text(encoding="utf-8"))
    assert not problems and info is not None
    tree = ast.parse((DEVSET / entry["solution"]).read_text(encoding="utf-8"))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes and "Model" not in classes
    init = next((f for f in classes["ModelNew"].body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    args = tuple(a.arg for a in init.args.args[1:]) if init else ()
    assert args == info.init_args, f"ModelNew takes {args}, Model takes {info.init_args}"
    kernels = [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
               and any("triton.jit" in ast.unparse(d) for d in f.decorator_list)]
    assert kernels, "no @triton.jit kernel"


# --------------------------------------------------------------------------- the verifier


@pytest.mark.slow
def test_fastest_devset_solutions_pass_the_verifier():
    """Four solutions (softmax, loss, normalization, a Level-2 GEMM epilogue) at the small sizes, through
    the same pool and level policy (strict for Level 1, fusion for Level 2) a model's candidate meets."""
    by_name = {e["name"]: e for e in ENTRIES}
    tasks = [_small_task(by_name[n]) for n in VERIFIED]
    started = time.perf_counter()
    with VerifierPool(cache=False, progress=False) as pool:
        verdicts = pool.map(tasks, [t.reference_solution for t in tasks])
    wall = time.perf_counter() - started
    failures = [f"{t.id}: stage={v.stage} reason={v.reason} flags={v.cheat_flags} {v.error[:300]}"
                for t, v in zip(tasks, verdicts) if not v.correct or v.cheat_flags]
    assert not failures, "\n".join(failures)
    for t, v in zip(tasks, verdicts):
        names = {e["name"] for e in v.errors}
        assert {"tiny", "original", "range", "seed", "larger"} <= names, (t.id, names)
        assert all(e["ok"] for e in v.errors), (t.id, v.errors)
    print(f"\n{len(tasks)} devset solutions verified in {wall:.1f}s on {pool.size} worker(s)")


def test_the_devset_is_a_task_source_at_both_sizes():
    from tritonrl_lib.tasks import load_tasks
    from tritonrl_lib.tasks.kb_format import module_constants

    full, small = load_tasks("devset", size="full"), load_tasks("devset", size="small")
    assert [t.id for t in full] == [t.id for t in small] and len(full) == len(_entries())
    assert all(t.origin == "devset" and t.category and not t.op_family for t in full)  # not the generator's families
    assert sum(t.reference_solution is not None for t in full) >= 16
    shrunk = [(f, s) for f, s in zip(full, small) if f.source != s.source]
    assert shrunk  # small rewrites constants only: the same names, smaller values
    for f, s in shrunk:
        assert set(module_constants(f.source)) == set(module_constants(s.source))
    assert {t.id for t in load_tasks("devset", levels=2)} == {t.id for t in full if t.level == 2}
