"""The train / held-out split over op families: deterministic, per category, written to the run."""

from __future__ import annotations

import pytest

from tritonrl_lib.data.split import (Split, heldout_tasks, leaked_family, make_split, n_heldout, single_op_family,
                                     train_tasks)
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.tasks.families import FAMILIES, all_families, category_of
from tritonrl_lib.tasks.task import Task


@pytest.fixture(scope="module")
def suite() -> list[Task]:
    return load_tasks("builtin", size="small")


def test_every_family_lands_on_exactly_one_side(suite):
    s = make_split(0, 0.25, suite)
    assert sorted(s.train_families + s.heldout_families) == sorted(all_families())
    assert not set(s.train_families) & set(s.heldout_families)


def test_each_category_holds_out_its_fraction_and_keeps_one_for_training(suite):
    s = make_split(3, 0.25, suite)
    for cats in FAMILIES.values():
        for cat, fams in cats.items():
            side = s.by_category[cat]
            assert len(side["heldout"]) == n_heldout(len(fams), 0.25)
            assert len(side["heldout"]) >= 1 and len(side["train"]) >= 1  # every category here has >= 2
            assert all(category_of(f) == cat for f in side["heldout"] + side["train"])


@pytest.mark.parametrize("n, fraction, expected", [(1, 0.5, 0), (2, 0.25, 1), (9, 0.25, 2), (14, 0.25, 4),
                                                    (4, 1.0, 3), (5, 0.0, 0)])
def test_n_heldout_rounds_with_floor_and_ceiling(n, fraction, expected):
    assert n_heldout(n, fraction) == expected


def test_same_seed_same_split_other_seed_other_split(suite):
    a, b = make_split(7, 0.25, suite), make_split(7, 0.25, suite)
    assert a.to_dict() == b.to_dict()
    others = {tuple(make_split(seed, 0.25, suite).heldout_families) for seed in range(5)}
    assert len(others) > 1


def test_task_ids_follow_their_family(suite):
    s = make_split(0, 0.25, suite)
    held = heldout_tasks(suite, s)
    assert held and all(t.op_family in s.heldout_families for t in held)
    assert [t.id for t in held] == s.heldout_task_ids
    assert [t.id for t in train_tasks(suite, s)] == s.train_task_ids
    assert len(s.heldout_task_ids) + len(s.train_task_ids) == len(suite)
    external = Task(id="kernelbench/L1/1_x", level=1, name="x", source="...")
    assert make_split(0, 0.25, [external]).untagged_task_ids == [external.id]


def test_heldout_families_are_chosen_among_those_with_tasks():
    only = [Task(id="a", level=1, name="a", source="s", op_family="relu", category="activation"),
            Task(id="b", level=1, name="b", source="s", op_family="gelu", category="activation")]
    for seed in range(6):
        s = make_split(seed, 0.1, only)  # 14 activations * 0.1 -> 1 held out
        assert s.by_category["activation"]["heldout"][0] in ("relu", "gelu")
        assert len(s.heldout_task_ids) == 1


def test_zero_fraction_holds_out_nothing_and_bad_fraction_is_an_error(suite):
    assert make_split(0, 0.0, suite).heldout_families == []
    with pytest.raises(ValueError, match="between 0 and 1"):
        make_split(0, 1.5, suite)


def test_split_file_round_trips(tmp_path, suite):
    s = make_split(1, 0.25, suite)
    s.settings = {"seed": 1}
    s.counts = {"sft_examples": 3}
    path = tmp_path / "split.json"
    s.save(path)
    assert Split.load(path).to_dict() == s.to_dict()
    path.write_text('{"seed": 1}')
    with pytest.raises(ValueError, match="re-run 01_data"):
        Split.load(path)


def test_single_op_references_reveal_their_family():
    assert single_op_family(["relu"]) == "relu"
    assert single_op_family(["softmax", "softmax"]) == "softmax"
    assert single_op_family(["mm"]) == "matmul"
    assert single_op_family(["relu", "mul"]) is None  # a fusion is no one op's task
    assert single_op_family(["conv2d"]) == "conv2d"  # the Level-1 convolution category
    assert single_op_family(["convtranspose3d"]) == "conv_transpose3d"
    assert single_op_family(["pixel_shuffle"]) is None  # not a family of ours
    assert leaked_family(["tanh"], ["tanh", "gelu"]) == "tanh"
    assert leaked_family(["tanh"], ["gelu"]) is None


# --------------------------------------------------------------------------- held-out set (a)


def test_in_family_holds_out_one_variant_of_each_train_family(suite):
    from tritonrl_lib.data.split import heldout_set_of, in_family_tasks, is_heldout

    s = make_split(0, 0.25, suite, in_family=1)
    held_in = in_family_tasks(suite, s)
    by_family: dict[str, list[Task]] = {}
    for t in held_in:
        by_family.setdefault(t.op_family, []).append(t)
    assert set(by_family) == set(s.train_families)  # every train family: exactly one unseen task
    assert all(len(v) == 1 and v[0].meta.get("variant_of") for v in by_family.values())  # never the original
    train = train_tasks(suite, s)
    assert not {t.id for t in train} & set(s.heldout_in_family_ids)
    assert {t.op_family for t in train} == set(s.train_families)  # each family keeps tasks to train on
    # the three sides cover the suite once
    assert len(s.train_task_ids) + len(s.heldout_task_ids) + len(s.heldout_in_family_ids) == len(suite)
    assert all(is_heldout(s, t) and heldout_set_of(s, t) == "tasks" for t in held_in)
    assert {heldout_set_of(s, t) for t in heldout_tasks(suite, s)} == {"families"}
    assert all(heldout_set_of(s, t) is None for t in train)


def test_in_family_choice_is_seeded_and_zero_keeps_the_old_split(suite):
    a, b = make_split(4, 0.25, suite, in_family=1), make_split(4, 0.25, suite, in_family=1)
    assert a.heldout_in_family_ids == b.heldout_in_family_ids
    assert make_split(5, 0.25, suite, in_family=1).heldout_in_family_ids != a.heldout_in_family_ids
    old = make_split(4, 0.25, suite)
    assert old.heldout_in_family_ids == [] and old.heldout_families == a.heldout_families
    two = make_split(4, 0.25, suite, in_family=5)  # more than a family has: its original stays for training
    assert len(two.heldout_in_family_ids) == 2 * len(two.train_families)
    with pytest.raises(ValueError, match="in_family"):
        make_split(0, 0.25, suite, in_family=-1)


def test_levels_name_the_categories_that_hold_families_out(suite):
    """With Level 2 left out, every fusion family trains and Level 1's held-out families stay as they were."""
    both = make_split(0, 0.25, suite)
    level1 = make_split(0, 0.25, suite, levels=[1])
    assert level1.levels == [1] and both.levels == [1, 2]
    assert not [f for f in level1.heldout_families if f in all_families(level=2)]
    assert set(all_families(level=2)) <= set(level1.train_families)
    assert level1.heldout_families == [f for f in both.heldout_families if f in all_families(level=1)]
    assert [f for f in both.heldout_families if f in all_families(level=2)]  # the default holds some out
    assert all(level1.side(t) != "heldout" for t in suite if t.level == 2)
    assert make_split(0, 0.25, suite, levels=[]).heldout_families == []
    with pytest.raises(ValueError, match=r"heldout_family_levels=\[3\]"):
        make_split(0, 0.25, suite, levels=[3])


def test_a_split_file_written_before_levels_existed_reads_as_both_levels(tmp_path, suite):
    d = make_split(0, 0.25, suite).to_dict()
    del d["levels"]
    assert Split.from_dict(d).levels == [1, 2]
