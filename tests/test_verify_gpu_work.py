"""Stream order and CUDA graphs (candidate/gpu_work.py), the parts that are logic rather than a GPU: the
happens-before bookkeeping of a call's launches, events, waits and host synchronisations, and a graph's
replay reported to the guard as the work it captured. On a GPU the same code is fed by torch.cuda's own
functions: tests/test_verify_gpu_classes.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tritonrl_lib.verify.candidate.gpu_work import StreamOrder

ROOT = Path(__file__).resolve().parents[1]
CALLER, SIDE, OTHER = 0x10, 0x20, 0x30


def order(current: int = CALLER) -> StreamOrder:
    o = StreamOrder(lambda: current)
    o.begin(CALLER)
    return o


def test_work_on_the_callers_stream_is_ordered():
    o = order()
    o.launch("k1")
    o.launch("k2", CALLER)
    assert o.end() == []


def test_a_side_stream_that_waits_for_nothing_is_a_race():
    # KernelBench's adversarial non_default_stream_kernel: launched on a new stream, never synchronised
    o = order()
    o.launch("k", SIDE)
    found = o.end()
    assert len(found) == 1 and "does not wait for the caller's stream" in found[0]


def test_a_side_stream_must_wait_for_the_caller_and_be_waited_for():
    # s.wait_stream(current) then launch, and the caller waits for s before returning: ordered
    o = order()
    o.record(1, CALLER)
    o.wait(1, SIDE)
    o.launch("k", SIDE)
    o.record(2, SIDE)
    o.wait(2, CALLER)
    assert o.end() == []
    # waited for the caller but never waited for: forward returns with the work still unordered
    o = order()
    o.record(1, CALLER)
    o.wait(1, SIDE)
    o.launch("k", SIDE)
    found = o.end()
    assert len(found) == 1 and "does not wait for before forward returns" in found[0]
    # waited for afterwards, but started early: it may run before the caller's inputs (or the timer's start)
    o = order()
    o.launch("k", SIDE)
    o.record(2, SIDE)
    o.wait(2, CALLER)
    assert len(o.end()) == 1


def test_the_wait_must_be_on_the_callers_stream_as_it_is_in_this_call():
    # an event recorded on the caller's stream before this call began says nothing of this call's inputs
    o = StreamOrder(lambda: CALLER)
    o.begin(CALLER)
    o.record(1, CALLER)
    o.begin(CALLER)  # the next call: its events are its own
    o.wait(1, SIDE)
    o.launch("k", SIDE)
    o.record(2, SIDE)
    o.wait(2, CALLER)
    assert len(o.end()) == 1


def test_host_synchronisation_orders_both_ways():
    # torch.cuda.synchronize() before the side launch (the caller's work is done) and after it (the host
    # waits for it before returning): KernelBench solutions that synchronise the device are ordered
    o = order()
    o.host_waits_all()
    o.launch("k", SIDE)
    o.host_waits_all()
    assert o.end() == []
    # the side stream synchronised alone, after a wait on the caller
    o = order()
    o.record(1, CALLER)
    o.wait(1, SIDE)
    o.launch("k", SIDE)
    o.host_waits_stream(SIDE)
    assert o.end() == []
    # an event's synchronize is the host waiting for what it recorded
    o = order()
    o.host_waits_stream(CALLER)
    o.launch("k", SIDE)
    o.record(3, SIDE)
    o.host_waits_event(3)
    assert o.end() == []


def test_ordering_is_transitive_through_other_streams():
    o = order()
    o.record(1, CALLER)
    o.wait(1, SIDE)  # SIDE after the caller
    o.record(2, SIDE)
    o.wait(2, OTHER)  # OTHER after SIDE, so after the caller
    o.launch("k", OTHER)
    o.record(3, OTHER)
    o.wait(3, SIDE)
    o.record(4, SIDE)
    o.wait(4, CALLER)  # the caller after SIDE, so after OTHER
    assert o.end() == []


def test_nothing_is_judged_outside_a_call():
    o = StreamOrder(lambda: SIDE)
    o.launch("k")  # no call begun: nothing recorded
    assert o.end() == [] and not o.active


def _run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_replayed_graph_reports_what_it_captured_to_the_guard():
    # what a graph captured (its aten ops, its heavy ops' operand dtypes, its Triton launches) is reported
    # at each replay as if it ran then: the census's policy and the launch count judge it like a plain call
    out = _run_python("""
        import json
        from tritonrl_lib.verify.candidate import gpu_work, guard, runtime_checks
        from tritonrl_lib.verify.candidate.gpu_work import GpuWork, GraphRecord
        g = guard.Guard("cand.py", trusted_files=[runtime_checks.__file__, gpu_work.__file__], enforce=False)
        g.install()
        watch = GpuWork()
        graph = object()
        watch.graphs[id(graph)] = GraphRecord(ops=["aten.mm.default", "aten.relu.default"], heavy=["gemm:float16"],
                                              kernels=[(guard.EV_LAUNCH, "my_kernel")])
        g.begin()
        watch.replayed(graph)
        watch.replayed(graph)
        watch.replayed(object())  # a graph captured before anything watched: its contents are unknown
        f = g.end()
        print(json.dumps({"ops": dict(f.ops), "heavy": dict(f.heavy), "launches": f.launches,
                          "kernels": dict(f.kernels), "flags": g.flags}))
    """)
    got = json.loads(out.strip().splitlines()[-1])
    assert got["ops"] == {"aten.mm.default": 2, "aten.relu.default": 2, "graph.replay (contents not recorded)": 1}
    assert got["heavy"] == {"gemm:float16": 2} and got["launches"] == 2 and got["kernels"] == {"my_kernel": 2}
    assert got["flags"] == []
