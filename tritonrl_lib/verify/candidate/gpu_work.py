"""A candidate's GPU work beyond plain launches on the caller's stream: stream order and CUDA graphs.

Stream order. A forward's GPU work must be ordered with the caller's current stream: launched on it, or
on a stream that waits for the caller's stream (an event recorded on it, `wait_stream`, a host
synchronisation) and that the caller's stream waits for before forward returns. Work on a stream that
does not wait is a race a real consumer loses (KernelBench's adversarial `non_default_stream_kernel`);
while timing, work queued on a stream that does not wait for the timer's can run during the timer's own
flush and spin, before the start event, and leave the measured time. `StreamOrder` keeps vector clocks
(one per stream, one for the host): every launch (Triton's, PyTorch's ops, a graph replay) ticks its
stream's clock, an event records its stream's clock, a wait merges an event's clock into a stream's, a
host synchronisation merges into the host's, which every later launch inherits. At the end of a call,
each launch off the caller's stream must have seen the caller's clock as it was when the call began,
and the caller's stream (or the host) must have seen the launch: anything else is reported
(guard.EV_UNORDERED) and judged `cheat:unordered_stream`.

CUDA graphs. What a graph replays is judged like what a plain call runs: while a graph is captured (in
`__init__` or in forward), the aten ops dispatched and the Triton kernels launched are recorded with it
(`GraphRecord`); each `replay()` reports them as if they ran (the op census's events, the launch
tracker's, the heavy ops' operand dtypes), so PyTorch compute captured into a graph counts under the
policy, a solution replaying its own Triton launches is launching them, and a graph replayed on stale
inputs fails on values like any stale answer. Launches made while capturing do not run and are not
ordered (the capture stream is torch's own).

Everything here is installed once before the candidate's import (`install`, GPU only) and reports
through the verifier's audit events, which only the verifier's files may raise (guard.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._python_dispatch import _get_current_dispatch_mode

from . import guard
from .heavy_ops import operand_key

MAX_REPORTED = 4  # unordered launches described per call


def _audit(event: str, *args: Any) -> None:
    sys.audit(event, *args)  # the verifier's own events: counted by the guard, raised only from trusted files


def _merge(into: dict[int, int], other: dict[int, int]) -> None:
    for stream, tick in other.items():
        if into.get(stream, 0) < tick:
            into[stream] = tick


class StreamOrder:
    """Happens-before bookkeeping of one call's GPU work (see the module's docstring). `current` returns
    the raw id of the current CUDA stream."""

    def __init__(self, current: Callable[[], int]):
        self.current = current
        self.caller: int | None = None
        self.start = 0
        self.clocks: dict[int, dict[int, int]] = {}
        self.host: dict[int, int] = {}
        self.events: dict[int, dict[int, int]] = {}
        self.launches: list[tuple[str, int, dict[int, int]]] = []

    @property
    def active(self) -> bool:
        return self.caller is not None

    def begin(self, caller: int | None = None) -> None:
        """A candidate call starts, its caller's stream `caller` (default: the current one)."""
        self.clocks, self.host, self.events, self.launches = {}, {}, {}, []
        self.caller = self.current() if caller is None else caller
        self.start = self._tick(self.caller)[self.caller]

    def _tick(self, stream: int) -> dict[int, int]:
        vc = self.clocks.setdefault(stream, {})
        _merge(vc, self.host)  # enqueued after everything the host has waited for
        vc[stream] = vc.get(stream, 0) + 1
        return dict(vc)

    def launch(self, what: str, stream: int | None = None) -> None:
        if self.caller is None:
            return
        stream = self.current() if stream is None else stream
        vc = self._tick(stream)
        if stream != self.caller:
            self.launches.append((what, stream, vc))

    def record(self, key: int, stream: int) -> None:
        if self.caller is not None:
            self.events[key] = self._tick(stream)

    def wait(self, key: int, stream: int) -> None:
        if self.caller is not None and key in self.events:
            _merge(self.clocks.setdefault(stream, {}), self.events[key])

    def host_waits_stream(self, stream: int) -> None:
        if self.caller is not None:
            _merge(self.host, self.clocks.get(stream, {}))

    def host_waits_event(self, key: int) -> None:
        if self.caller is not None and key in self.events:
            _merge(self.host, self.events[key])

    def host_waits_all(self) -> None:
        if self.caller is not None:
            for vc in self.clocks.values():
                _merge(self.host, vc)

    def end(self) -> list[str]:
        """The call's launches that were not ordered with the caller's stream, described; the bookkeeping
        stops until the next `begin`."""
        caller, start = self.caller, self.start
        if caller is None:
            return []
        after = dict(self.clocks.get(caller, {}))
        _merge(after, self.host)  # what the caller's next work is ordered after
        out = []
        for what, stream, vc in self.launches:
            if vc.get(caller, 0) < start:
                out.append(f"{what} launched on stream {stream:#x}, which does not wait for the caller's stream")
            elif after.get(stream, 0) < vc.get(stream, 0):
                out.append(f"{what} launched on stream {stream:#x}, which the caller's stream does not wait for "
                           "before forward returns")
            if len(out) >= MAX_REPORTED:
                break
        self.caller = None
        return out


@dataclass
class GraphRecord:
    """What a CUDA graph runs when replayed: aten ops, heavy ops' operand dtypes, Triton kernels."""

    ops: list[str] = field(default_factory=list)
    heavy: list[str] = field(default_factory=list)
    kernels: list[tuple[str, str]] = field(default_factory=list)  # (event, kernel name)


class CaptureRecorder(TorchDispatchMode):
    """The aten ops dispatched while a graph is captured outside forward (forward's census records them
    itself, see runtime_checks.OpCensus)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self, record: GraphRecord):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        note_captured_op(self.record, func, args)
        return func(*args, **(kwargs or {}))


def note_captured_op(record: GraphRecord, func: Any, args: tuple) -> None:
    record.ops.append(str(func))
    key = operand_key(func, args)
    if key is not None:
        record.heavy.append(key)


class GpuWork:
    """The process's one watch of stream order and CUDA graphs (`WATCH`)."""

    def __init__(self) -> None:
        self.order: StreamOrder | None = None
        self.capturing: list[GraphRecord] = []  # the graphs being captured now, innermost last
        self.graphs: dict[int, GraphRecord] = {}
        self.census_type: type | None = None  # forward's op census (runtime_checks.OpCensus registers it)
        self.installed = False

    def census_on_top(self) -> bool:
        """Whether forward's op census is the innermost dispatch mode (it then records a capture's ops)."""
        return self.census_type is not None and type(_get_current_dispatch_mode()) is self.census_type

    def capture(self) -> GraphRecord | None:
        return self.capturing[-1] if self.capturing else None

    def begin_call(self) -> None:
        """A candidate call starts (its caller's stream: the current one)."""
        if self.order is not None:
            self.order.begin()

    def end_call(self, report: bool = True) -> list[str]:
        """The call's launches not ordered with its caller's stream (with `report`, each told to the guard:
        guard.EV_UNORDERED, counted during a checked call)."""
        found = self.order.end() if self.order is not None else []
        if report:
            for text in found:
                _audit(guard.EV_UNORDERED, text)
        return found

    def kernel_launched(self, event: str, name: str) -> bool:
        """A Triton launch (the launch tracker's): recorded with the graph being captured (True: it does
        not run now), else ordered as a launch on the current stream."""
        record = self.capture()
        if record is not None:
            record.kernels.append((event, name))
            return True
        if self.order is not None:
            self.order.launch(f"Triton kernel {name}")
        return False

    def install(self) -> None:
        """Wrap the stream, event, synchronisation and graph functions of torch.cuda (GPU only, once)."""
        if self.installed or not torch.cuda.is_available():
            return
        device = torch.cuda.current_device()
        raw = torch._C._cuda_getCurrentRawStream
        self.order = StreamOrder(lambda: raw(device))
        order, watch = self.order, self

        def stream_id(stream: Any) -> int:
            handle = getattr(stream, "cuda_stream", None) if stream is not None else None
            return int(handle) if handle is not None else raw(device)  # none named: the current stream

        event_cls, stream_cls = torch.cuda.Event, torch.cuda.Stream
        record, wait, ev_sync, ev_query = event_cls.record, event_cls.wait, event_cls.synchronize, event_cls.query
        st_sync, st_query = stream_cls.synchronize, stream_cls.query
        device_sync = torch.cuda.synchronize

        def record_w(self, stream=None):
            order.record(id(self), stream_id(stream))
            return record(self, stream) if stream is not None else record(self)

        def wait_w(self, stream=None):
            order.wait(id(self), stream_id(stream))
            return wait(self, stream) if stream is not None else wait(self)

        def ev_sync_w(self):
            out = ev_sync(self)
            order.host_waits_event(id(self))
            return out

        def ev_query_w(self):
            done = ev_query(self)
            if done:
                order.host_waits_event(id(self))
            return done

        def st_sync_w(self):
            out = st_sync(self)
            order.host_waits_stream(stream_id(self))
            return out

        def st_query_w(self):
            done = st_query(self)
            if done:
                order.host_waits_stream(stream_id(self))
            return done

        def device_sync_w(*args, **kwargs):
            out = device_sync(*args, **kwargs)
            order.host_waits_all()
            return out

        for cls, name, fn in ((event_cls, "record", record_w), (event_cls, "wait", wait_w),
                              (event_cls, "synchronize", ev_sync_w), (event_cls, "query", ev_query_w),
                              (stream_cls, "synchronize", st_sync_w), (stream_cls, "query", st_query_w)):
            fn.__name__ = name
            fn.__wrapped__ = getattr(cls, name)  # type: ignore[attr-defined]
            setattr(cls, name, fn)
        device_sync_w.__wrapped__ = device_sync  # type: ignore[attr-defined]
        torch.cuda.synchronize = device_sync_w

        graph_cls = torch.cuda.CUDAGraph
        begin, end, replay = graph_cls.capture_begin, graph_cls.capture_end, graph_cls.replay
        modes: dict[int, CaptureRecorder] = {}

        def begin_w(self, *args, **kwargs):
            record = GraphRecord()
            watch.graphs[id(self)] = record
            watch.capturing.append(record)
            if not watch.census_on_top():
                modes[id(self)] = CaptureRecorder(record)
                modes[id(self)].__enter__()
            try:
                return begin(self, *args, **kwargs)
            except BaseException:
                watch._stop(self, modes)
                raise

        def end_w(self, *args, **kwargs):
            try:
                return end(self, *args, **kwargs)
            finally:
                watch._stop(self, modes)

        def replay_w(self, *args, **kwargs):
            watch.replayed(self)
            return replay(self, *args, **kwargs)

        for name, fn, original in (("capture_begin", begin_w, begin), ("capture_end", end_w, end),
                                   ("replay", replay_w, replay)):
            fn.__name__ = name
            fn.__wrapped__ = original  # type: ignore[attr-defined]
            setattr(graph_cls, name, fn)
        self.installed = True

    def _stop(self, graph: Any, modes: dict[int, CaptureRecorder]) -> None:
        record = self.graphs.get(id(graph))
        if record is not None and record in self.capturing:
            self.capturing.remove(record)
        mode = modes.pop(id(graph), None)
        if mode is not None:
            mode.__exit__(None, None, None)

    def replayed(self, graph: Any) -> None:
        """A graph's replay: what it captured, reported as run now, on the current stream."""
        record = self.graphs.get(id(graph))
        if record is None:
            _audit(guard.EV_OP, "graph.replay (contents not recorded)")
            return
        for name in record.ops:
            _audit(guard.EV_OP, name)
        for key in record.heavy:
            _audit(guard.EV_HEAVY, key)
        for event, name in record.kernels:
            _audit(event, name)
        if self.order is not None and self.capture() is None:
            self.order.launch("a CUDA graph's replay")


WATCH = GpuWork()
