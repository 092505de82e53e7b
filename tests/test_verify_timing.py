"""The timing's own rules, on the CPU where its code can run there (candidate/timing.py's `time_pair` with a
clock of CPU primitives, the same path a GPU takes): every timed call gets values the candidate has never
seen (timed_inputs.py), so a content cache neither hits nor passes; checked calls are held to their own
sets' references; the process's global state is read after every call; the precision-matched reference's
TF32 switch leaves nothing changed. The GPU-only parts are in tests/test_verify_gpu_classes.py."""

from __future__ import annotations

import gc
import itertools
import os
import tempfile
import time as _time
import types

import pytest
import torch

from tritonrl_lib.verify.candidate.input_sets import InputSet, drawer
from tritonrl_lib.verify.candidate.process_state import ProcessState
from tritonrl_lib.verify.candidate.timed_inputs import TimedCalls, TimedInputs
from tritonrl_lib.verify.candidate.timing import Tf32Allowed, time_pair
from tritonrl_lib.verify.candidate.variations import load_task_module

from verifier_fixtures import CASES

WARMUP, TRIALS = 3, 12


def cpu_clock():
    """time_pair's primitives, on the CPU."""
    picks = itertools.count(7)
    return types.SimpleNamespace(
        buf=torch.zeros(8), sync=lambda: None, spin=lambda cycles: None, zero=torch.Tensor.zero_, stream=None,
        record=lambda ev, stream: ev.__setitem__(0, _time.perf_counter()), event_sync=lambda ev: None,
        elapsed=lambda a, b: (b[0] - a[0]) * 1e3, new_event=lambda: [0.0], sigmask=None,
        urandom=lambda n: next(picks).to_bytes(n, "little") if n <= 4 else os.urandom(n),
        gc_disable=gc.disable, gc_enable=gc.enable, gc_enabled=gc.isenabled)


@pytest.fixture(scope="module")
def task():
    """The relu task's get_inputs (KernelBench's `torch.randn`), its sets as the reference phase makes them."""
    with tempfile.TemporaryDirectory() as folder:
        module = load_task_module((CASES / "tasks" / "relu.py").read_text(), folder, "tritonrl_timing_task")
    original = InputSet("original", "full", "base", drawer(module.get_inputs, 42, "cpu"), None, [])
    checks = [InputSet(f"timed:{k}", "timed", "base", drawer(module.get_inputs, 3042 + 7919 * k, "cpu"), None, [])
              for k in range(4)]
    seen = [drawer(module.get_inputs, seed, "cpu", transform)()  # what the full stage ran it on
            for seed, transform in ((42, None), (1042, lambda xs: [-x for x in xs]), (42, lambda xs: [x + 2 for x in xs]))]
    return types.SimpleNamespace(fresh=lambda seed: drawer(module.get_inputs, seed, "cpu")(), original=original,
                                 checks=checks, seen=seen)


def fingerprint(x: torch.Tensor) -> tuple:
    """A content cache's cheap key: a few values and the sum (flashinfer-bench #21's kind)."""
    flat = x.reshape(-1)
    return tuple(x.shape), round(float(flat[:4].sum()), 4), round(float(x.sum()), 2)


class ContentCache:
    """The attack: remember each answer under a fingerprint of its input's values; on a hit, no work."""

    def __init__(self, key=fingerprint):
        self.key, self.cache, self.hits = key, {}, 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        k = self.key(x)
        if k in self.cache:
            self.hits += 1
            return self.cache[k]
        out = self.cache[k] = torch.relu(x)
        return out


def timed_run(task, cand, fresh=True):
    """The timing as candidate_phase.timing runs it, on the CPU: TimedInputs and TimedCalls around
    time_pair; returns (calls, every call's inputs' fingerprints)."""
    clock = cpu_clock()
    supply = TimedInputs(task.fresh if fresh else None, task.checks, task.original, TRIALS, "cpu", clock.urandom)
    calls = TimedCalls(supply, None, ProcessState.capture(), TRIALS - 1, torch.Tensor.clone, lambda: None)
    keys = []

    def cand_call():
        keys.append(fingerprint(calls.inputs[0]))
        return cand(*calls.inputs)

    ref_in = task.original.draw("cpu")
    time_pair(lambda: torch.relu(*ref_in), cand_call, WARMUP, TRIALS, clock=clock, on_output=calls.keep,
              chosen=supply.checked, before_cand=calls.before, after_cand=calls.after)
    return calls, keys


def test_every_timed_call_gets_values_never_seen_and_a_content_cache_never_hits(task):
    cand = ContentCache()
    for inputs in task.seen:  # the full stage: the cache holds every answer the candidate gave before timing
        cand(*inputs)
    calls, keys = timed_run(task, cand)
    assert len(keys) == WARMUP + TRIALS
    assert cand.hits == 0  # not one timed call, warm-up included, saw values it had seen before
    assert len(set(keys)) == len(keys) and not set(keys) & {fingerprint(x[0]) for x in task.seen}
    # the checked calls: the last, and three others chosen before timing, each on its own timed set, whose
    # outputs are those sets' reference outputs (checked by the judge as the full stage's are)
    assert sorted(t for t, _, _ in calls.kept)[-1] == TRIALS - 1 and len(calls.kept) == 4
    assert sorted(name for _, name, _ in calls.kept) == [f"timed:{k}" for k in range(4)]
    for _, name, outs in calls.kept:
        s = next(c for c in task.checks if c.name == name)
        assert torch.equal(outs[0], torch.relu(*s.draw("cpu")))
    assert calls.inputs is None  # no call's inputs are held past it


def test_reusing_the_full_stage_values_is_what_the_cache_needs(task):
    # the attack's premise, shown on the old way (timed calls on values the candidate had run on): every
    # unchecked call hits
    cand = ContentCache()
    for inputs in task.seen:
        cand(*inputs)
    _, keys = timed_run(task, cand, fresh=False)
    assert cand.hits == WARMUP + TRIALS - 4


def test_a_cache_keyed_on_too_little_returns_other_calls_answers_and_fails(task):
    # keyed on the shape alone it "hits" on fresh values too: the checked calls get another call's answer,
    # which their own sets' references refuse (the judge's timed_output_wrong: tests/test_verify_units.py)
    cand = ContentCache(key=lambda x: tuple(x.shape))
    for inputs in task.seen:
        cand(*inputs)
    cand.hits = 0
    calls, _ = timed_run(task, cand)
    assert cand.hits == WARMUP + TRIALS
    wrong = [name for _, name, outs in calls.kept
             if not torch.allclose(outs[0], torch.relu(*next(c for c in task.checks if c.name == name).draw("cpu")))]
    assert sorted(wrong) == [f"timed:{k}" for k in range(4)]


def test_timed_inputs_choose_the_checked_trials_before_timing_and_draw_fresh_otherwise(task):
    picks = iter(range(100))
    supply = TimedInputs(task.fresh, task.checks, task.original, 10, "cpu",
                         lambda n: next(picks).to_bytes(n, "little") if n == 4 else os.urandom(n))
    assert 9 in supply.checked and len(supply.checked) == 4
    for trial in supply.checked:
        assert torch.equal(supply.draw(trial)[0], supply.by_trial[trial].draw("cpu")[0])
    a, b = supply.draw(-1), supply.draw(next(t for t in range(10) if t not in supply.checked))
    assert not torch.equal(a[0], b[0])
    # no timed set (no room for their outputs): the last call is checked on the original's values
    only = TimedInputs(task.fresh, [], task.original, 10, "cpu", os.urandom)
    assert only.checked == {9} and only.set_name(9) == "original"


def test_global_state_is_read_after_every_timed_call(task):
    # a switch flipped at the end of one call, for the reference's next trial, and put back at the start of
    # the candidate's next call: no reading before and after the timing sees it; one after every call does
    before = torch.backends.cudnn.benchmark
    flips = itertools.count()

    def cand(x):
        torch.backends.cudnn.benchmark = before  # put back
        out = torch.relu(x)
        if next(flips) == WARMUP + 4:
            torch.backends.cudnn.benchmark = not before  # flipped for the reference's trial
        return out

    try:
        calls, _ = timed_run(task, cand)
        assert torch.backends.cudnn.benchmark == before
        assert calls.state_changes == ["torch._get_cudnn_benchmark"]
    finally:
        torch.backends.cudnn.benchmark = before


def test_the_precision_matched_reference_leaves_every_switch_as_it_was():
    # TF32 allowed for the reference's trial only, then cuBLAS's, cuDNN's and every fp32_precision put back
    # exactly: the process-state check after the call sees nothing (whatever the switches were before)
    seen = []
    tf32 = Tf32Allowed()
    for setup in (lambda: None, lambda: torch.set_float32_matmul_precision("high"),
                  lambda: setattr(torch.backends.cudnn, "allow_tf32", False)):
        setup()
        state = ProcessState.capture()
        tf32.run(lambda: seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)))
        assert state.changes() == []
    assert seen == [(True, True)] * 3
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = True


def test_time_pair_times_a_third_side_and_calls_the_hooks_around_every_candidate_call():
    order = []
    out = time_pair(lambda: order.append("ref"), lambda: order.append("cand"), 2, 4, clock=cpu_clock(),
                    before_cand=lambda c: order.append(("before", c)), after_cand=lambda c: order.append(("after", c)),
                    ref_tf32_fn=lambda: order.append("ref_tf32"))
    assert sorted(out) == ["cand", "ref", "ref_tf32"] and all(len(v) == 4 for v in out.values())
    assert [x for x in order if isinstance(x, tuple) and x[0] == "before"] == [("before", c) for c in (-2, -1, 0, 1, 2, 3)]
    # each candidate call sits between its own before and after
    for i, x in enumerate(order):
        if x == "cand":
            assert order[i - 1][0] == "before" and order[i + 1][0] == "after"
