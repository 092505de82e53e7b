"""The candidate's inputs for every timed call: values it has never seen.

A cache keyed on a cheap fingerprint of the inputs' values (a few elements, a sum) hits on every timed
call when the timed calls reuse values the candidate has already run on (public record: flashinfer-bench
#21, gpu-mode reference-kernels #160). So each timed call, warm-up included, gets the task's inputs
drawn afresh from a seed of its own (`get_inputs()` under a random seed the candidate's process draws
then, in new tensors): no earlier call saw those values, a content cache cannot hit, and one keyed on
too little (the shapes) returns another call's answer. The calls whose outputs are checked (the last,
and the others the budget allows, at random, chosen before timing starts and never told) run on the
reference phase's `timed:<k>` sets instead: drawn the same way from secret seeds before the candidate
was imported, their reference outputs with the worker; the candidate meets each for the first time in
its checked call, and its output there is held to that set's reference as the full stage's are.
Where no such set could be made (no room for their outputs), the last call runs on the original set's
values and is checked against the original's reference.

After each timed call `TimedCalls` reads its stream order (gpu_work.py) and the global state. The timed
calls run without forward's op census, so their stream order covers Triton launches, graph replays,
events and synchronisations but not PyTorch ops: aten work a timed call queues on a stream that does not
wait for the timer's goes unreported (checked calls order it op by op; see gpu_work.py's limit).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .gpu_work import GpuWork
from .input_sets import InputSet
from .process_state import ProcessState
from .runtime_checks import flatten_outputs

SEED_BITS = 63
MAX_FINDINGS = 8  # stream-order and global-state findings of the timed calls kept


class TimedInputs:
    """Inputs per call of the timing (`draw(call)`: warm-up calls are numbered below 0) and which trials
    are checked against which input set (`checked`, `set_name`)."""

    def __init__(self, fresh: Callable[[int], list[Any]] | None, checks: list[InputSet], fallback: InputSet,
                 trials: int, device: str, rand: Callable[[int], bytes]):
        self.fresh = fresh
        self.fallback = fallback
        self.device = device
        self.rand = rand
        sets = list(checks) or [fallback]
        chosen: list[int] = [trials - 1] if trials > 0 else []
        others = list(range(max(0, trials - 1)))
        while len(chosen) < len(sets) and others:
            chosen.append(others.pop(int.from_bytes(rand(4), "little") % len(others)))
        self.by_trial: dict[int, InputSet] = dict(zip(chosen, sets))

    @property
    def checked(self) -> set[int]:
        return set(self.by_trial)

    def set_name(self, trial: int) -> str:
        return self.by_trial[trial].name

    def seed(self) -> int:
        return int.from_bytes(self.rand(8), "little") & ((1 << SEED_BITS) - 1)

    def draw(self, call: int) -> list[Any]:
        """The inputs of timed call `call` (negative: a warm-up call): a checked trial's set, else values
        drawn afresh (the original set's own where the task cannot be drawn again)."""
        s = self.by_trial.get(call)
        if s is not None:
            return s.draw(self.device)
        if self.fresh is None:
            return self.fallback.draw(self.device)
        return self.fresh(self.seed())


def kept_as_returned(output: Any, clone: Callable[[Any], Any], sync: Callable[[], Any]) -> list[Any]:
    """A timed call's outputs copied as they were returned (after its time was read). A kernel may
    honestly return one buffer it reuses call after call: kept by reference, a checked trial's output
    would hold a later trial's result (odd trials run on the seed set's values) and be failed as
    behaviour that changes once timed, where the full stage judged each output as returned."""
    outs = [clone(t) if isinstance(t, torch.Tensor) else t for t in flatten_outputs(output)]
    sync()  # the copies finish before the next trial's timed region
    return outs


class TimedCalls:
    """What the timing does around each candidate call (timing.time_pair's hooks): `before` gives the call
    its inputs (`inputs`, the last call's dropped first) and starts the stream-order bookkeeping;
    `after` drops the inputs, and records what the call left behind: GPU work not ordered with the
    timer's stream (`unordered`) and global state changed (`state_changes`), after every call, so a switch
    flipped for the reference's next trial and put back at the candidate's next call still shows; `keep`
    keeps a checked trial's outputs (copied as returned, `clone`/`sync`) with the set it is held to."""

    def __init__(self, supply: TimedInputs, watch: GpuWork | None, state: ProcessState | None, last: int,
                 clone: Callable[[Any], Any], sync: Callable[[], Any]):
        self.supply, self.watch, self.state, self.last = supply, watch, state, last
        self.clone, self.sync = clone, sync
        self.inputs: list[Any] | None = None
        self.unordered: list[str] = []
        self.state_changes: list[str] = []
        self.kept: list[tuple[int, str, list[Any]]] = []

    def before(self, call: int) -> None:
        self.inputs = None  # the last call's inputs go before the next are drawn
        self.inputs = self.supply.draw(call)
        if self.watch is not None:
            self.watch.begin_call()

    def after(self, call: int) -> None:
        self.inputs = None
        for text in self.watch.end_call(report=False) if self.watch is not None else ():
            if len(self.unordered) < MAX_FINDINGS:
                self.unordered.append(f"timed call {call}: {text}")
        for what in self.state.changes() if self.state is not None else ():
            if what not in self.state_changes and len(self.state_changes) < MAX_FINDINGS:
                self.state_changes.append(what)

    def keep(self, trial: int, output: Any) -> None:
        # the last trial's output is never written again: kept as it is (no second copy of a large output)
        outs = flatten_outputs(output) if trial == self.last else kept_as_returned(output, self.clone, self.sync)
        self.kept.append((trial, self.supply.set_name(trial), outs))
