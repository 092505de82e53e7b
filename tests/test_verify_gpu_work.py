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

import pytest

from tritonrl_lib.core.config import gpu_available
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


# ---- events known by the object itself (not by id()), and the wrappers' shadow events

class Ev:
    """A stand-in event: any object will do for StreamOrder (CPython hands a freed one's id to the next)."""


def test_a_freed_event_hands_its_clock_to_no_new_event():
    # record ev1 on the caller's stream, drop it, make ev2: CPython would give ev2 ev1's id; CUDA's wait on
    # ev2 (never recorded) waits for nothing, so the side launch is a race and must be reported
    o = order()
    ev1 = Ev()
    o.record(ev1, CALLER)
    old = id(ev1)
    del ev1
    fresh = [Ev() for _ in range(64)]
    assert all(id(e) != old for e in fresh)  # the bookkeeping holds ev1 until the call ends
    ev2 = fresh[0]
    o.wait(ev2, SIDE)
    o.launch("k", SIDE)
    ev3 = Ev()
    o.record(ev3, SIDE)
    o.wait(ev3, CALLER)
    found = o.end()
    assert len(found) == 1 and "does not wait for the caller's stream" in found[0]
    assert o.events == {}  # and let go once the call ends


def test_a_wait_on_an_event_never_recorded_merges_nothing():
    o = order()
    o.wait(Ev(), SIDE)
    o.launch("k", SIDE)
    o.host_waits_event(Ev())
    assert len(o.end()) == 1


def test_the_latest_record_of_an_event_wins():
    o = order()
    ev = Ev()
    o.record(ev, CALLER)
    o.wait(ev, SIDE)
    o.launch("k", SIDE)
    o.record(ev, SIDE)
    o.record(ev, OTHER)  # re-recorded on a stream with nothing of SIDE's: the caller's wait misses the launch
    o.wait(ev, CALLER)
    found = o.end()
    assert len(found) == 1 and "does not wait for before forward returns" in found[0]
    # an event recorded where nothing can vouch for it (into a graph being captured) holds nothing after
    o = order()
    ev = Ev()
    o.record(ev, CALLER)
    o.forget(ev)
    o.wait(ev, SIDE)
    o.launch("k", SIDE)
    o.host_waits_all()
    assert len(o.end()) == 1


class FakeStream:
    """A stand-in for torch.cuda.Stream: `real` is the stream its C struct names."""

    def __init__(self, real: int):
        self.real = real

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class Shadow:
    def __init__(self) -> None:
        self.done = True


class Watched:
    """A GpuWork driven with Python stand-ins of torch.cuda.Event / Stream and of the C primitives; `log`
    holds what the shadows were made to do, `current` is the current stream."""

    def __init__(self) -> None:
        from tritonrl_lib.verify.candidate.gpu_work import EventPrimitives, GpuWork

        self.log: list[tuple] = []
        self.current = FakeStream(CALLER)
        log = self.log

        class Event:  # a fresh class per test: wrap_events patches it
            def __init__(self) -> None:
                self.at: int | None = None

            def record(self, stream=None):
                if stream is not None and not isinstance(stream, FakeStream):
                    raise TypeError("not a stream")
                self.at = (stream or watched.current).real

            def wait(self, stream=None):
                if stream is not None and not isinstance(stream, FakeStream):
                    raise TypeError("not a stream")

            def synchronize(self):
                pass

            def query(self):
                return True

        class Stream(FakeStream):
            pass

        watched = self
        self.Event, self.Stream = Event, Stream
        self.watch = GpuWork()
        self.watch.order = StreamOrder(lambda: watched.current.real)
        self.watch.prims = EventPrimitives(
            current_stream=lambda: watched.current,
            handle=lambda s: s.real if isinstance(s, FakeStream) else None,
            new_event=Shadow,
            record=lambda e, s: log.append(("record", e, s.real)),
            wait=lambda e, s: log.append(("wait", e, s.real)),
            synchronize=lambda e: log.append(("sync", e)),
            query=lambda e: e.done)
        self.watch.wrap_events(Event, Stream)

    def launch(self, stream: int) -> None:
        self.watch.order.launch("k", stream)


def test_through_the_wrappers_a_reused_id_is_still_a_race():
    w = Watched()
    w.watch.begin_call()
    ev1 = w.Event()
    ev1.record()  # on the caller's stream
    old = id(ev1)
    del ev1
    ev2 = w.Event()
    assert id(ev2) != old
    ev2.wait(FakeStream(SIDE))  # never recorded: CUDA waits for nothing
    w.launch(SIDE)
    ev3 = w.Event()
    ev3.record(FakeStream(SIDE))
    ev3.wait()
    found = w.watch.end_call(report=False)
    assert len(found) == 1 and "does not wait for the caller's stream" in found[0]


def test_through_the_wrappers_an_honest_fork_and_join_is_ordered_and_its_shadows_follow():
    w = Watched()
    w.watch.begin_call()
    side = w.Stream(SIDE)
    fork, join = w.Event(), w.Event()
    fork.record()
    fork.wait(side)
    w.launch(SIDE)
    join.record(side)
    join.wait(w.current)
    assert w.watch.end_call(report=False) == []
    (r1, s1, at1), (w1, s1b, on1), (r2, s2, at2), (w2, s2b, on2) = w.log
    assert (r1, at1, w1, on1) == ("record", CALLER, "wait", SIDE) and s1 is s1b
    assert (r2, at2, w2, on2) == ("record", SIDE, "wait", CALLER) and s2 is s2b and s2 is not s1
    # the shadows are kept for the next call rather than made again
    assert set(map(id, w.watch.spare)) == {id(s1), id(s2)}
    w.watch.begin_call()
    w.Event().record()
    assert w.log[-1][1] in (s1, s2)


def test_a_record_or_wait_that_raised_is_not_booked():
    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    try:
        ev.record(object())  # refused: the event still holds the caller's clock
    except TypeError:
        pass
    ev.wait(FakeStream(SIDE))
    w.launch(SIDE)
    join = w.Event()
    join.record(FakeStream(SIDE))
    try:
        join.wait(object())  # refused: the caller never waited
    except TypeError:
        pass
    found = w.watch.end_call(report=False)
    assert len(found) == 1 and "does not wait for before forward returns" in found[0]


def test_a_record_the_wrappers_never_saw_cannot_change_what_the_wait_waits_for():
    # super(torch.cuda.Event, ev).record(idle) re-records the candidate's event behind the wrappers: the
    # booked wait is also made on the shadow, recorded where the wrapper saw the record, so the GPU waits
    # for what the bookkeeping counts
    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    ev.wait(FakeStream(SIDE))
    w.launch(SIDE)
    ev.record(FakeStream(SIDE))
    shadow = w.log[-1][1]
    ev.at = OTHER  # what an unseen record would do to the candidate's event
    ev.wait()
    assert w.log[-1] == ("wait", shadow, CALLER)
    assert w.watch.end_call(report=False) == []


def test_records_while_a_graph_is_captured_hold_nothing_and_waits_then_merge_nothing():
    from tritonrl_lib.verify.candidate.gpu_work import GraphRecord

    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    w.watch.capturing.append(GraphRecord())
    ev.record()  # captured: runs at the graph's replays
    ev.wait(FakeStream(SIDE))
    w.watch.capturing.pop()
    ev.wait(FakeStream(SIDE))  # the event no longer holds the caller's clock
    w.launch(SIDE)
    w.watch.device_synchronized()
    found = w.watch.end_call(report=False)
    assert len(found) == 1 and "does not wait for the caller's stream" in found[0]
    assert [entry[0] for entry in w.log] == ["record"]  # no shadow touched while capturing


def test_a_query_counts_as_a_host_wait_only_when_the_shadow_is_done_too():
    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    ev.wait(FakeStream(SIDE))
    w.launch(SIDE)
    ev.record(FakeStream(SIDE))
    w.log[-1][1].done = False  # the side stream's work still runs, whatever the candidate's event says
    assert ev.query() is True
    found = w.watch.end_call(report=False)
    assert len(found) == 1 and "does not wait for before forward returns" in found[0]
    # done on both: the host has waited
    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    ev.wait(FakeStream(SIDE))
    w.launch(SIDE)
    ev.record(FakeStream(SIDE))
    ev.query()
    assert w.watch.end_call(report=False) == []
    # synchronize: the host waits on the shadow as well
    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    ev.wait(FakeStream(SIDE))
    w.launch(SIDE)
    ev.record(FakeStream(SIDE))
    ev.synchronize()
    assert w.log[-1] == ("sync", w.log[-2][1]) and w.watch.end_call(report=False) == []


def test_the_calls_events_are_let_go_when_it_ends():
    import weakref

    w = Watched()
    w.watch.begin_call()
    ev = w.Event()
    ev.record()
    ref = weakref.ref(ev)
    del ev
    assert ref() is not None  # held while the call runs: its id names no other event
    w.watch.end_call(report=False)
    assert ref() is None


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_watch_books_what_cuda_does():
    # the wrappers on torch.cuda's own classes: a reused id is a race, a record made behind the wrappers
    # (super(torch.cuda.Event, ev).record) cannot undo the wait booked, a stream is the one its C struct names
    out = _run_python("""
        import json, torch
        from tritonrl_lib.verify.candidate.gpu_work import WATCH
        WATCH.install()
        got = {}
        caller, side, idle = torch.cuda.current_stream(), torch.cuda.Stream(), torch.cuda.Stream()

        def side_launch():
            with torch.cuda.stream(side):
                WATCH.order.launch("k")

        # 1. the id-reuse sequence
        WATCH.begin_call()
        ev1 = torch.cuda.Event(); ev1.record(); old = id(ev1); del ev1
        ev2 = torch.cuda.Event(); ev2.wait(side)
        side_launch()
        done = torch.cuda.Event(); done.record(side); done.wait()
        got["reuse_same_id"] = id(ev2) == old
        got["reuse"] = WATCH.end_call(report=False)

        # 2. honest: wait_stream both ways, then event/stream/device synchronisations and queries
        WATCH.begin_call()
        side.wait_stream(caller); side_launch(); caller.wait_stream(side)
        got["honest"] = WATCH.end_call(report=False)
        WATCH.begin_call()
        ev = torch.cuda.Event(); ev.record(); ev.wait(side); side_launch()
        ev.record(side); ev.synchronize(); ev.query(); side.synchronize(); side.query(); torch.cuda.synchronize()
        got["syncs"] = WATCH.end_call(report=False)

        # 3. a record behind the wrappers: the caller still waits for the side stream's work (its shadow)
        x = torch.zeros(1 << 20, device="cuda")
        torch.cuda.synchronize()
        WATCH.begin_call()
        ev = torch.cuda.Event(); ev.record(); ev.wait(side)
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time, then the value
            x.fill_(1.0)
            WATCH.order.launch("k")
        ev.record(side)
        super(torch.cuda.Event, ev).record(idle)  # unseen: the event now holds an idle stream's nothing
        ev.wait()
        y = x.clone()  # on the caller's stream
        got["unseen_record"] = WATCH.end_call(report=False)
        torch.cuda.synchronize()
        got["unseen_record_value"] = float(y.min())

        # 4. a stream is the one its C struct names, whatever a subclass's cuda_stream says
        class Liar(torch.cuda.Stream):
            cuda_stream = property(lambda self: caller.cuda_stream)
        liar = Liar()
        real = torch._C._CudaStreamBase.__dict__["cuda_stream"].__get__(liar)
        got["liar"] = [WATCH.prims.handle(liar) == real, real != caller.cuda_stream]
        g = torch.Stream(stream_id=side.stream_id, device_index=side.device_index, device_type=side.device_type)
        got["generic"] = WATCH.prims.handle(g) == side.cuda_stream

        # 5. records inside a graph's capture touch no shadow and book nothing
        a = torch.ones(16, device="cuda")
        WATCH.begin_call()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            b = a * 2
            torch.cuda.Event().record()
        graph.replay()
        got["graph"] = WATCH.end_call(report=False)
        print(json.dumps(got))
    """)
    got = json.loads(out.strip().splitlines()[-1])
    assert len(got["reuse"]) == 1 and "does not wait for the caller's stream" in got["reuse"][0], got
    assert got["honest"] == [] and got["syncs"] == [], got
    assert got["unseen_record"] == [] and got["unseen_record_value"] == 1.0, got
    assert got["liar"] == [True, True] and got["generic"] is True, got
    assert got["graph"] == [], got
