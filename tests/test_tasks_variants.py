"""The suite's variants (tasks/variants.py): three tasks per family, written as the rules say,
changing only what a variant is meant to change."""

from __future__ import annotations

import ast
import json
from collections import Counter

from tritonrl_lib.tasks import load_builtin
from tritonrl_lib.tasks.builtin_suite import BUILTIN_DIR, MANIFEST_PATH
from tritonrl_lib.tasks.families import all_families
from tritonrl_lib.tasks.kb_format import module_constants
from tritonrl_lib.tasks.variants import half_source, main, planned_manifest, variant_sizes


def test_the_manifest_and_files_follow_the_rules():
    assert main(["--check"]) == 0
    planned, files = planned_manifest(json.loads(MANIFEST_PATH.read_text()))
    assert planned["tasks"] == json.loads(MANIFEST_PATH.read_text())["tasks"]
    assert all((BUILTIN_DIR / f).read_text() == text for f, text in files.items())


def test_every_family_has_an_original_and_two_variants():
    tasks = load_builtin("small")
    per_family = Counter(t.op_family for t in tasks)
    assert set(per_family) == set(all_families()) and set(per_family.values()) == {3}
    originals = {t.name: t for t in tasks if not t.meta.get("variant_of")}
    for t in tasks:
        if t.meta.get("variant_of"):
            orig = originals[t.meta["variant_of"]]
            assert t.op_family == orig.op_family and t.reference_solution == orig.reference_solution
            assert t.source != orig.source  # something a reader can see differs


def test_full_presets_keep_the_element_count_of_sizes():
    # a doubled and a halved dimension: no variant asks more memory of the GPU than its original
    row = {"small": {"batch_size": 6, "dim": 100}, "full": {"batch_size": 4096, "dim": 8192}}
    v2, v3 = variant_sizes("relu", row, 2), variant_sizes("relu", row, 3)
    assert v2["full"] == {"batch_size": 8192, "dim": 4096} and v3["full"] == {"batch_size": 2048, "dim": 16384}
    assert v2["small"] != row["small"] != v3["small"]
    axis = {"small": {"batch_size": 3, "dim1": 20, "dim2": 24, "reduce_dim": 1},
            "full": {"batch_size": 32, "dim1": 1024, "dim2": 1024, "reduce_dim": 1}}
    assert variant_sizes("sum_dim", axis, 2)["full"]["reduce_dim"] == 2
    assert variant_sizes("sum_dim", axis, 3)["small"]["reduce_dim"] == 0


def test_half_source_changes_only_the_input_dtypes():
    src = (BUILTIN_DIR / "level1" / "kl_div.py").read_text()
    half = half_source(src, "float16")
    assert half.count("dtype=torch.float16") == 2
    assert module_constants(half) == module_constants(src)
    strip = lambda s: ast.dump(ast.parse(s.replace(", dtype=torch.float16", "")))  # noqa: E731
    assert strip(half) == strip(src)
