"""KernelBook rows -> KernelBench tasks with ModelNew solutions, from the project's own fixture rows."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from tritonrl_lib.data.kernelbook import (COLUMNS, NormaliseError, load_kernelbook, normalise_row, normalise_rows,
                                          read_kernelbook_rows, rename_identifier)
from tritonrl_lib.tasks.kb_format import check_kb_source

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kernelbook"
sys.path.insert(0, str(FIXTURES))
import make_fixture  # noqa: E402  (the rows' source of truth)
from source_modules import import_source

SOURCES = [FIXTURES / "rows.jsonl", FIXTURES / "rows.parquet"]


def test_fixture_files_are_current_and_have_kernelbooks_columns():
    rows = [json.loads(line) for line in (FIXTURES / "rows.jsonl").read_text().splitlines()]
    assert rows == make_fixture.ROWS  # regenerate with make_fixture.py after editing the rows
    assert all(list(r) == list(COLUMNS) for r in rows)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.suffix)
def test_load_normalises_good_rows_and_counts_skipped_ones(source):
    kb = load_kernelbook(source)
    assert kb.n_rows == len(make_fixture.ROWS)
    assert dict(kb.skipped) == make_fixture.SKIP_EXPECTED
    assert [t.id for t in kb.tasks] == ["kernelbook/kb-0001", "kernelbook/kb-0002", "kernelbook/kb-0003",
                                        "kernelbook/kb-0004"]
    for t in kb.tasks:
        assert t.origin == "kernelbook" and t.op_family == ""
        module, problems = check_kb_source(t.source, t.id)
        assert not problems, problems  # a well-formed KernelBench module
        sol = ast.parse(t.reference_solution)
        assert "ModelNew" in [n.name for n in sol.body if isinstance(n, ast.ClassDef)]
        assert t.meta["repo_name"] and t.meta["uuid"] and t.meta["licenses"] == ["Apache-2.0"]
        assert t.level in (1, 2, 3) and t.meta["difficulty_reasons"]


def test_parquet_and_jsonl_give_the_same_tasks():
    a, b = (load_kernelbook(s) for s in SOURCES)
    assert [t.to_dict() for t in a.tasks] == [t.to_dict() for t in b.tasks]


def test_reference_runs_as_kernelbench_with_positional_init_inputs(tmp_path):
    kb = load_kernelbook(SOURCES[0])
    gated = next(t for t in kb.tasks if t.name == "GatedLinear")
    mod = import_source(gated.source, tmp_path / "kb_gated.py")
    assert mod.get_init_inputs() == [4, 8, True, 0.5]  # kwargs mapped onto the constructor, default filled
    model = mod.Model(*mod.get_init_inputs())
    assert model.gate_scale == 0.5 and model.fc.out_features == 8
    out = model(*mod.get_inputs())
    assert tuple(out.shape) == (4, 8)
    empty = next(t for t in kb.tasks if t.name == "ScaledReLU")
    assert "return []" in empty.source and "[[], {}]" not in empty.source


def test_renaming_leaves_nn_classes_strings_and_attributes_alone():
    kb = load_kernelbook(SOURCES[0])
    tanh = next(t for t in kb.tasks if t.name == "Tanh")
    assert "class Model(nn.Module)" in tanh.source and "super(Model, self)" in tanh.source
    assert "nn.Tanh()" in tanh.source  # the entry point is called Tanh, nn.Tanh is not it
    assert "class ModelNew(nn.Module)" in tanh.reference_solution
    assert "super(ModelNew, self)" in tanh.reference_solution
    code = 'class Foo:\n    name = "Foo"  # Foo\n\nx = Foo()\ny = mod.Foo\n'
    assert rename_identifier(code, "Foo", "Model") == 'class Model:\n    name = "Foo"  # Foo\n\nx = Model()\ny = mod.Foo\n'


def _row(**kw):
    base = dict(make_fixture.ROWS[1])
    base.update(kw)
    return base


@pytest.mark.parametrize("row, reason", [
    (_row(entry_point=""), "missing_field"),
    (_row(triton_code=None), "missing_field"),
    (_row(python_code="class AddBias(nn.Module):\n    def f(self:\n"), "python_syntax_error"),
    (_row(triton_code="def (x):"), "triton_syntax_error"),
    (_row(entry_point="Nope"), "entry_point_not_found"),
    (_row(python_code=make_fixture.ADD_BIAS_PY.replace("def get_inputs", "def other_inputs")), "no_get_inputs"),
    (_row(python_code=make_fixture.ADD_BIAS_PY.replace("def get_init_inputs", "def other_init")),
     "no_get_init_inputs"),
    (_row(python_code=make_fixture.ADD_BIAS_PY.replace("'features': 16", "'width': 16")), "init_inputs_unmappable"),
    (_row(python_code=make_fixture.ADD_BIAS_PY + "\n\nclass Model(nn.Module):\n    pass\n"), "name_collision"),
    (_row(triton_code=make_fixture.ADD_BIAS_TRITON.replace("AddBiasNew", "Other")), "solution_class_not_found"),
    (_row(triton_code=make_fixture.ADD_BIAS_TRITON.replace("@triton.jit", "")), "no_triton_kernel"),
])
def test_each_unusable_row_is_skipped_with_its_reason(row, reason):
    with pytest.raises(NormaliseError) as e:
        normalise_row(row)
    assert e.value.reason == reason
    assert normalise_rows([row]).skipped == {reason: 1}


def test_a_single_new_class_is_taken_even_when_its_name_differs():
    t = normalise_row(_row(triton_code=make_fixture.ADD_BIAS_TRITON.replace("AddBiasNew", "BiasAdderNew")))
    assert "class ModelNew" in t.reference_solution and "BiasAdderNew" not in t.reference_solution


def test_bad_sources_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_kernelbook_rows(tmp_path / "nope.parquet")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"code": "x", "level": 1}) + "\n")
    with pytest.raises(ValueError, match="python_code, triton_code, entry_point are missing"):
        read_kernelbook_rows(bad)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .parquet"):
        read_kernelbook_rows(empty)


def test_limit_reads_the_first_rows():
    assert len(read_kernelbook_rows(SOURCES[1], limit=3)) == 3


@pytest.mark.slow
def test_verification_keeps_only_solutions_that_pass_and_reports_the_rate():
    """The hand-written row, GatedLinear (its GEMM kept in PyTorch, as the fusion policy allows) and
    the Tanh row, which calls libdevice (a GPU links NVIDIA's; on the CPU the verifier fills it in for
    the interpreter), pass; the de-inductored ScaledReLU, whose output buffer is float32 whatever the
    inputs, is rejected on the float16 set: an output's dtype must be the reference's on every set."""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.split import make_split
    from tritonrl_lib.data.stage import kernelbook_examples
    from tritonrl_lib.verify import VerifierPool

    kb = load_kernelbook(SOURCES[0])
    split = make_split(0, 0.0)  # nothing held out: every row is eligible
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        examples, summary = kernelbook_examples(kb, split, pool, verify=True)
    assert summary["rows"] == 8 and summary["kept"] == 4
    assert [e.task_id for e in examples] == ["kernelbook/kb-0002", "kernelbook/kb-0003", "kernelbook/kb-0004"], summary
    assert summary["pass_rate"] == 0.75 and summary["verify_failures"] == {"dtype_mismatch": 1}
    assert all(e.verified and e.origin == "kernelbook" for e in examples)


def test_inductor_output_is_made_self_contained():
    kb = load_kernelbook(SOURCES[0])
    for t in (kb.tasks[0], kb.tasks[2]):  # the two inductor rows
        sol = t.reference_solution
        ast.parse(sol)
        assert "torch._inductor" not in sol and "torch._C" not in sol and "torch.cuda.set_device" not in sol
        assert "assert_size_stride" not in sol and "get_raw_stream" not in sol and "_DeviceGuard" not in sol
        assert "def grid(*numels):" in sol and "def empty_strided_cuda(" in sol
        assert "\n    buf0 = empty_strided_cuda(" in sol  # the device-guard block is dedented into call()
    assert "tl.maximum(tmp1, tmp0)" in kb.tasks[0].reference_solution  # triton_helpers.maximum
    assert "from triton.language.extra import libdevice" in kb.tasks[2].reference_solution
    hand = kb.tasks[1].reference_solution  # hand-written Triton is left as written (renamed only)
    assert hand == make_fixture.ADD_BIAS_TRITON.replace("AddBiasNew", "ModelNew")


def test_inductor_grid_shim_matches_inductors_launch_grid():
    from tritonrl_lib.data.inductor import SHIMS

    ns: dict = {}
    exec("import triton\n" + SHIMS["grid"], ns)
    assert ns["grid"](256)({"XBLOCK": 128}) == (2, 1, 1)
    assert ns["grid"](100, 7)({"XBLOCK": 32, "YBLOCK": 4}) == (4, 2, 1)


def test_rows_that_are_a_heldout_family_task_stay_out_of_training():
    from tritonrl_lib.data.split import Split
    from tritonrl_lib.data.stage import kernelbook_examples

    kb = load_kernelbook(SOURCES[0])
    split = Split(seed=0, heldout_fraction=0.5, train_families=[], heldout_families=["tanh", "add"], by_category={})
    examples, summary = kernelbook_examples(kb, split, pool=None, verify=False)
    assert summary["heldout_family_rows"] == {"add": 1, "tanh": 1}
    assert sorted(e.task_id for e in examples) == ["kernelbook/kb-0001", "kernelbook/kb-0004"]
    assert not any(e.verified for e in examples)
