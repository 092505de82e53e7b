"""What a task promises about its inputs, and its weights' layout, honoured by the verifier: the value
sets keep a triangular input's zeros and a symmetric input's symmetry (KernelBench L1/13-15), so a kernel
that relies on them passes, while a wrong one still fails; a weight the solution laid out anew from the
same values (transposed, under the reference's name) is not overwritten by the reference's copy. The seed
set's rows sorted ascending (each row's largest values last) catch a row's tiles combined wrongly."""

from __future__ import annotations


import pytest
import torch

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.candidate.loading_watch import relaid_out
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.candidate.variations import (RANGE_CHUNK, keep_structure, offset, ranged, row_scaled,
                                                      sorted_last_dim, value_transforms)

from verifier_fixtures import candidate, task


def test_value_sets_keep_zeros_and_symmetry_they_were_drawn_with():
    g = torch.Generator().manual_seed(0)
    tri = torch.tril(torch.rand(8, 8, generator=g))
    s = torch.rand(2, 6, 6, generator=g)
    sym = s + s.mT
    dense = torch.rand(8, 8, generator=g)
    for transform in (offset, lambda xs: ranged(xs, 1), lambda xs: row_scaled(xs, 2)):
        changed = transform([tri, sym, dense])
        t, y, d = keep_structure([tri, sym, dense], changed)
        assert torch.equal(t, torch.tril(t)) and bool((t[tri != 0] != tri[tri != 0]).any())  # changed, still triangular
        assert torch.equal(y, y.mT) and not torch.equal(y, sym)
        assert d is changed[2]  # nothing to keep: the transform's own
    assert torch.equal(keep_structure([tri], offset([tri]))[0][tri == 0], torch.zeros(int((tri == 0).sum())))


def test_a_relaid_weight_is_told_from_another_init():
    w = torch.randn(6, 6)
    assert relaid_out(w.t().contiguous(), w) and relaid_out(w.flip(0), w)
    assert not relaid_out(w.clone(), w)  # the same layout: copying changes nothing
    assert not relaid_out(torch.randn(6, 6), w)  # other values: the reference's are copied over
    assert not relaid_out(w.t().half(), w) and not relaid_out(torch.arange(3), torch.arange(3).flip(0))


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifyConfig(timeout_s=60), workers=1, device="cpu", cache=False, progress=False) as p:
        yield p


@pytest.mark.parametrize("task_name,name,level", [
    ("tril_matmul", "tril_matmul_skips_zero_tiles_ok", 1),
    ("symmetric_matmul", "symmetric_matmul_reads_rows_ok", 1),
    ("linear_square_clamp_lse_mish", "linear_square_prepacked_weight_ok", 2),
])
def test_kernels_relying_on_what_the_task_promises_pass(pool, task_name, name, level):
    v = pool.verify(task(task_name, level), candidate(name))
    assert v.correct and v.cheat_flags == [], (v.reason, v.error[:400])


def test_a_wrong_structured_kernel_still_fails(pool):
    skips_the_diagonal_tile = candidate("tril_matmul_skips_zero_tiles_ok").replace(
        "k_hi = tl.minimum(pm * BM + BM, N)", "k_hi = tl.minimum(pm * BM, N)")
    assert skips_the_diagonal_tile != candidate("tril_matmul_skips_zero_tiles_ok")
    v = pool.verify(task("tril_matmul"), skips_the_diagonal_tile)
    assert not v.correct and v.reason.startswith("mismatch:"), (v.reason, v.error[:300])


def test_the_seed_sets_transform_negates_and_scales_rows_by_powers_of_two():
    x = torch.rand(6, 5) + 0.5
    ratio = row_scaled([x], 7)[0] / x  # exact: powers of two
    assert bool((ratio < 0).all()) and bool((ratio == ratio[:, :1]).all())  # one factor per row, negative
    k = torch.log2(-ratio[:, 0])
    assert torch.equal(k, k.round()) and bool(((k >= -4) & (k <= 2)).all())
    for seed in range(20):  # the range's two ends in every draw, the top one in a single row
        k = torch.log2(-(row_scaled([torch.ones(3, 2)], seed)[0][:, 0]))
        assert k.max() == 2 and k.min() == -4, (seed, k)
        assert torch.log2(-(row_scaled([torch.ones(1, 2)], seed)[0][0, 0])) == 2
    assert torch.equal(row_scaled([x], 7, rows=False)[0], -x)  # the fallback when rescaled rows are not finite
    assert torch.equal(row_scaled([x], 7, negate=False, rows=False)[0], x)


def test_the_seed_set_sorts_each_row_ascending_along_the_last_dimension():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, 50, generator=g)
    before = x.clone()
    (y,) = sorted_last_dim([x])
    assert y is x  # in place: the seed set's inputs are its own copies
    assert bool((y[..., 1:] >= y[..., :-1]).all())
    assert torch.equal(y, before.sort(dim=-1).values)  # the same values in each row, in order
    ints, column = torch.arange(10).flip(0), torch.randn(5, 1, generator=g)
    strided = torch.randn(8, 6, generator=g).t()
    kept = [ints.clone(), column.clone(), strided.clone()]
    assert [torch.equal(a, b) for a, b in zip(sorted_last_dim(kept), [ints, column, strided])] == [True] * 3
    # rows past RANGE_CHUNK are left as drawn (a sort's indices would double a huge input's memory)
    assert RANGE_CHUNK >= 1 << 20


def test_the_seed_sets_first_form_negates_scales_rows_and_sorts():
    x = torch.rand(4, 64) + 0.5
    transform, said = value_transforms("seed", 11)[0]
    (y,) = transform([x.clone()])
    assert said.startswith("inputs negated, rows times 2**k") and "sorted ascending" in said
    assert bool((y < 0).all()) and bool((y[:, 1:] >= y[:, :-1]).all())
    ratio = y.abs().sort(dim=1).values / x.sort(dim=1).values  # each row's values, times its own power of two
    assert torch.equal(ratio, ratio[:, :1].expand(4, 64))
    unsorted = [form for form, note in value_transforms("seed", 11)
                if form is not None and "sorted ascending" not in note]
    assert unsorted, "forms without the sort remain for references that are not finite on sorted rows"


def test_an_online_logsumexp_without_its_rescale_fails_on_sorted_rows(pool):
    """On values in [0, 1) in random order the dropped rescale is off by less than the tolerance (every
    tile's maximum is near the row's, and the log shrinks the rest): only rows whose later tiles hold the
    larger values show it. The honest kernel passes the same sets."""
    honest = pool.verify(task("logsumexp_rand"), candidate("logsumexp_online_ok"))
    assert honest.correct, (honest.reason, honest.error[:300])
    wrong = pool.verify(task("logsumexp_rand"), candidate("logsumexp_online_no_rescale"))
    assert not wrong.correct and wrong.reason == "mismatch:seed", (wrong.reason, wrong.error[:300])
