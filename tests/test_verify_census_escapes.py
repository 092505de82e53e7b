"""Ways to run PyTorch or host compute out of the op census's sight, found by red-teaming the CPU
verifier, each caught at runtime: the dispatch side switched off (the Python key excluded, through a
public helper or with torch functions off as well), values handed to numpy or Python through DLPack, a
storage or serialisation, and the candidate's own code run inside the compile check's pause. Honest
tuple and namedtuple kernel arguments still pass."""

from __future__ import annotations


import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.pool import VerifierPool

from verifier_fixtures import candidate, task

RELU = task("relu")


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(VerifyConfig(timeout_s=60, memory_limit_mb=2500), workers=1, device="cpu", cache=False,
                      progress=False) as p:
        yield p


# each passes the static check (its callables kept in a dict or on self, its compute in a property or a
# tuple subclass's __init__): the runtime layer alone must catch it
PAST_THE_STATIC_CHECK = {
    "esc_sparse_fallback_in_dict": "census_bypassed",  # fallback_dispatcher runs relu under _DisableTorchDispatch
    "esc_dlpack_numpy_roundtrip": "host_compute",  # np.from_dlpack(x) -> numpy ReLU -> torch.from_dlpack
    "esc_dlpack_numpy_writes_output": "host_compute",  # numpy writes into the output through DLPack
    "esc_compile_check_property": "pytorch_compute:aten.relu.default",  # a kernel argument's property
    "esc_compile_check_tuple_init": "pytorch_compute:aten.relu.default",  # a tuple subclass's __init__
}
# the static check refuses these (torch._C, private dispatch modules, ...); with it off, runtime still does
RUNTIME_ONLY = {
    "esc_both_modes_off": "census_bypassed",
    "esc_no_dispatch_alias": "census_bypassed",
    "esc_pop_both_stacks": "census_bypassed",
    "esc_storage_tolist": "host_compute",
    "esc_torch_save_bytes": "host_compute",
}


def _assert_caught(v, name: str, flag: str) -> None:
    assert not v.correct and v.reward == 0.0, (name, v.reason, v.error[:300])
    assert v.reason.startswith("cheat:") and flag in v.cheat_flags, (name, v.reason, v.cheat_flags)


def test_escapes_past_the_static_check_are_caught_at_runtime(pool):
    names = list(PAST_THE_STATIC_CHECK)
    for name, v in zip(names, pool.map(RELU, [candidate(n) for n in names], progress=False)):
        assert v.stage == "compile", (name, v.stage, v.reason)  # the static check passed it
        _assert_caught(v, name, PAST_THE_STATIC_CHECK[name])


def test_escapes_the_static_check_refuses_are_caught_at_runtime_too(pool):
    names = list(RUNTIME_ONLY)
    for name, code in zip(names, [candidate(n) for n in names]):
        assert pool.verify(RELU, code).reason.startswith("static:"), name
    for name, v in zip(names, pool.map(RELU, [candidate(n) for n in names], static=False, progress=False)):
        _assert_caught(v, name, RUNTIME_ONLY[name])


def test_honest_tuple_and_namedtuple_arguments_still_pass(pool):
    for static in (True, False):
        v = pool.map(RELU, [candidate("relu_namedtuple_args_ok"), candidate("relu_ok")], static=static,
                     progress=False)
        assert all(x.correct and x.cheat_flags == [] for x in v), [(x.reason, x.error[:200]) for x in v]


def test_compute_on_the_weights_while_they_are_loaded_is_flagged(pool):
    """A load_state_dict hook runs outside forward: folding the epilogue into the weights there (here a
    sum over features into one weight vector) is PyTorch compute; a transposed copy made there is not."""
    gemm = task("gemm_div_sum_scale", level=2)
    folded, honest = pool.map(gemm, [candidate("esc_fold_into_weights_on_load"), candidate("gemm_div_sum_scale_ok")],
                              progress=False)
    _assert_caught(folded, "esc_fold_into_weights_on_load", "compute_while_loading")
    assert "aten.sum.dim_IntList" in folded.error, folded.error[:300]
    assert honest.correct and honest.cheat_flags == [], (honest.reason, honest.error[:300])
    # layout work while loading is not compute: two weights concatenated, a kernel flipped
    for task_name, name in (("gated_linear", "gated_linear_cat_on_load_ok"),
                            ("conv_transpose_relu", "conv_transpose_flip_on_load_ok")):
        v = pool.verify(task(task_name, level=2), candidate(name))
        assert v.correct and v.cheat_flags == [], (name, v.reason, v.error[:300])


def test_a_tuple_subclass_with_code_of_its_own_is_not_a_plain_argument():
    from collections import namedtuple
    from typing import NamedTuple

    import torch

    from tritonrl_lib.verify.candidate.runtime_checks import _plain_argument

    class Pair(NamedTuple):
        a: torch.Tensor
        b: int

    class Hooked(tuple):
        pass

    class Iterates(NamedTuple):
        a: int

        def __iter__(self):
            return iter(())

    t = torch.ones(2)
    assert _plain_argument((t, 3)) and _plain_argument(Pair(t, 1)) and _plain_argument(namedtuple("P", "x")(t))
    assert not _plain_argument(Hooked([t])) and not _plain_argument(Iterates(1))
    assert not _plain_argument(type("Box", (), {"__module__": "tritonrl_candidate"})())  # not Triton's own
