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

What the bookkeeping believes, the GPU does. An event is known by the object itself, held until the call
ends (an `id()` freed and reused by a new event would hand it the old one's clock, where CUDA's wait on
a never-recorded event waits for nothing), and only a record or wait that succeeded is booked, on the
stream read from the stream's C struct (a `cuda_stream` property of a subclass could name another).
Each booked record also records a verifier's own event, the shadow, beside it, and each booked wait,
event synchronisation and query is also made on the shadow: a record the wrappers never saw (a base
class's `record` reached through `super(torch.cuda.Event, ev)`, say) can change the candidate's event,
never the dependency booked. Records and waits while a graph is captured run nothing now: a record then
drops what the event held, a wait merges nothing. Waits and synchronisations the wrappers never see
(torch.Event, torch.Stream's own methods) are simply not booked, so they can only add findings.

Limit: PyTorch ops are ordered through forward's op census (runtime_checks.OpCensus, `_order_op`),
which is on during checked calls only. During the timing (candidate_phase.timing, timed_inputs.TimedCalls)
the census is off, so a timed call's Triton launches, graph replays, events and synchronisations are
ordered, but its PyTorch ops are not: aten work queued on a side stream that does not wait for the
timer's stream is not reported there, and could run during the flush and spin, before the start event.
The same code is ordered op by op on every checked call, so only a candidate that changes behaviour once
timed escapes this way, and a timed call's PyTorch ops escape the op census's policy likewise. Ordering
them would need a dispatch mode around each timed call, which routes every aten op through Python inside
the timed region (microseconds each, paid by the candidate and not the reference).

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


@dataclass
class Recorded:
    """An event's last booked record in this call: the event itself (held, so its id names no other
    event while the entry lives), the clock it recorded, the verifier's shadow event recorded with it."""

    event: Any
    clock: dict[int, int]
    shadow: Any = None


class StreamOrder:
    """Happens-before bookkeeping of one call's GPU work (see the module's docstring). `current` returns
    the raw id of the current CUDA stream. Events are any objects, known by identity."""

    def __init__(self, current: Callable[[], int]):
        self.current = current
        self.caller: int | None = None
        self.start = 0
        self.clocks: dict[int, dict[int, int]] = {}
        self.host: dict[int, int] = {}
        self.events: dict[int, Recorded] = {}  # by id(event); each entry holds its event
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

    def entry(self, event: Any) -> Recorded | None:
        """`event`'s last record booked in this call (None: none, so a wait on it waits for nothing)."""
        if self.caller is None:
            return None
        found = self.events.get(id(event))
        return found if found is not None and found.event is event else None

    def record(self, event: Any, stream: int, shadow: Any = None) -> None:
        """`event` recorded on `stream`: it holds that stream's clock now (the latest record wins)."""
        if self.caller is not None:
            self.events[id(event)] = Recorded(event, self._tick(stream), shadow)

    def forget(self, event: Any) -> None:
        """`event` recorded with nothing this bookkeeping can vouch for (into a graph being captured, on a
        stream it cannot name): waits on it merge nothing."""
        if self.entry(event) is not None:
            del self.events[id(event)]

    def wait(self, event: Any, stream: int) -> None:
        found = self.entry(event)
        if found is not None:
            _merge(self.clocks.setdefault(stream, {}), found.clock)

    def host_waits_stream(self, stream: int) -> None:
        if self.caller is not None:
            _merge(self.host, self.clocks.get(stream, {}))

    def host_waits_event(self, event: Any) -> None:
        found = self.entry(event)
        if found is not None:
            _merge(self.host, found.clock)

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
        self.events = {}  # the call's events are let go
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


@dataclass
class EventPrimitives:
    """What the watch drives its shadow events with, taken when installed (before the candidate's import):
    the C methods of CUDA events, a stream's raw handle read from its C struct (None: not a CUDA stream),
    the current stream. Tests pass plain Python stand-ins."""

    current_stream: Callable[[], Any]
    handle: Callable[[Any], int | None]
    new_event: Callable[[], Any]
    record: Callable[[Any, Any], Any]
    wait: Callable[[Any, Any], Any]
    synchronize: Callable[[Any], Any]
    query: Callable[[Any], bool]


MAX_SPARE_SHADOWS = 64  # shadow events kept for the next calls (one per event a call records)


class GpuWork:
    """The process's one watch of stream order and CUDA graphs (`WATCH`)."""

    def __init__(self) -> None:
        self.order: StreamOrder | None = None
        self.prims: EventPrimitives | None = None
        self.spare: list[Any] = []  # shadow events free for reuse
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
        order = self.order
        if order is not None and order.active:
            for held in order.events.values():
                if held.shadow is not None and len(self.spare) < MAX_SPARE_SHADOWS:
                    self.spare.append(held.shadow)
        found = order.end() if order is not None else []
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

    # ---- events and streams (torch.cuda.Event's and torch.cuda.Stream's methods, wrapped by `install`):
    # each is told after the wrapped call returned, so a call that raised books nothing

    def _booking(self) -> tuple[StreamOrder, EventPrimitives] | None:
        """The bookkeeping and primitives, while a call is watched and no graph is being captured."""
        order, prims = self.order, self.prims
        if order is None or prims is None or not order.active or self.capture() is not None:
            return None
        return order, prims

    def _shadow(self) -> Any:
        return self.spare.pop() if self.spare else self.prims.new_event()  # type: ignore[union-attr]

    def event_recorded(self, event: Any, stream: Any) -> None:
        """`event.record(stream)` returned: booked, and the shadow recorded on the same stream."""
        order = self.order
        if order is None or not order.active:
            return
        booking = self._booking()
        if booking is None:  # recorded into a graph being captured: it no longer holds what it held
            order.forget(event)
            return
        prims = booking[1]
        s = prims.current_stream() if stream is None else stream
        handle = prims.handle(s)
        if handle is None:
            order.forget(event)
            return
        held = order.entry(event)
        shadow = held.shadow if held is not None and held.shadow is not None else self._shadow()
        prims.record(shadow, s)
        order.record(event, handle, shadow)

    def event_waited(self, event: Any, stream: Any) -> None:
        """`event.wait(stream)` returned: the stream waits for the event's booked record (through its
        shadow); an event with none booked in this call merges nothing, as CUDA waits for nothing."""
        booking = self._booking()
        if booking is None:
            return
        order, prims = booking
        held = order.entry(event)
        if held is None:
            return
        s = prims.current_stream() if stream is None else stream
        handle = prims.handle(s)
        if handle is None:
            return
        if held.shadow is not None:
            prims.wait(held.shadow, s)
        order.wait(event, handle)

    def event_synchronized(self, event: Any) -> None:
        """`event.synchronize()` returned: the host waits for the booked record (its shadow too)."""
        booking = self._booking()
        held = booking[0].entry(event) if booking is not None else None
        if held is None:
            return
        if held.shadow is not None:
            booking[1].synchronize(held.shadow)  # type: ignore[index]
        booking[0].host_waits_event(event)  # type: ignore[index]

    def event_queried(self, event: Any, done: bool) -> None:
        """`event.query()` returned `done`: the host has waited for the booked record only if its
        shadow is done as well."""
        booking = self._booking()
        held = booking[0].entry(event) if booking is not None and done else None
        if held is None:
            return
        if held.shadow is None or booking[1].query(held.shadow):  # type: ignore[index]
            booking[0].host_waits_event(event)  # type: ignore[index]

    def stream_synchronized(self, stream: Any) -> None:
        """`stream.synchronize()` returned, or `stream.query()` said done: the host waited for it."""
        booking = self._booking()
        handle = booking[1].handle(stream) if booking is not None else None
        if handle is not None:
            booking[0].host_waits_stream(handle)  # type: ignore[index]

    def device_synchronized(self) -> None:
        if self.order is not None and self.capture() is None:
            self.order.host_waits_all()

    def wrap_events(self, event_cls: type, stream_cls: type) -> None:
        """Wrap `event_cls`'s record / wait / synchronize / query and `stream_cls`'s synchronize / query
        (torch.cuda.Event and torch.cuda.Stream): each calls the original, then tells this watch."""
        watch = self
        record, wait, ev_sync, ev_query = event_cls.record, event_cls.wait, event_cls.synchronize, event_cls.query
        st_sync, st_query = stream_cls.synchronize, stream_cls.query

        def record_w(self, stream=None):
            out = record(self, stream) if stream is not None else record(self)
            watch.event_recorded(self, stream)
            return out

        def wait_w(self, stream=None):
            out = wait(self, stream) if stream is not None else wait(self)
            watch.event_waited(self, stream)
            return out

        def ev_sync_w(self):
            out = ev_sync(self)
            watch.event_synchronized(self)
            return out

        def ev_query_w(self):
            done = ev_query(self)
            watch.event_queried(self, bool(done))
            return done

        def st_sync_w(self):
            out = st_sync(self)
            watch.stream_synchronized(self)
            return out

        def st_query_w(self):
            done = st_query(self)
            if done:
                watch.stream_synchronized(self)
            return done

        for cls, name, fn in ((event_cls, "record", record_w), (event_cls, "wait", wait_w),
                              (event_cls, "synchronize", ev_sync_w), (event_cls, "query", ev_query_w),
                              (stream_cls, "synchronize", st_sync_w), (stream_cls, "query", st_query_w)):
            fn.__name__ = name
            fn.__wrapped__ = getattr(cls, name)  # type: ignore[attr-defined]
            setattr(cls, name, fn)

    def install(self) -> None:
        """Wrap the stream, event, synchronisation and graph functions of torch.cuda (GPU only, once)."""
        if self.installed or not torch.cuda.is_available():
            return
        device = torch.cuda.current_device()
        raw = torch._C._cuda_getCurrentRawStream
        self.order = StreamOrder(lambda: raw(device))
        self.prims = cuda_primitives()
        self.wrap_events(torch.cuda.Event, torch.cuda.Stream)
        watch = self
        device_sync = torch.cuda.synchronize

        def device_sync_w(*args, **kwargs):
            out = device_sync(*args, **kwargs)
            watch.device_synchronized()
            return out

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


def cuda_primitives() -> EventPrimitives:
    """The C functions behind CUDA events and streams, as they are now (install time, before the candidate's
    import): what a subclass or a patched Python method does cannot reach them."""
    c = torch._C
    event_base, stream_base = c._CudaEventBase, c._CudaStreamBase
    current = torch.cuda.current_stream
    cuda_stream = stream_base.__dict__["cuda_stream"]  # the C getter: a subclass's property cannot shadow it
    generic = getattr(torch, "Stream", None)

    def handle(stream: Any) -> int | None:
        kind = type(stream)
        if issubclass(kind, stream_base):
            return int(cuda_stream.__get__(stream))
        if generic is not None and issubclass(kind, generic):  # torch.Stream: the CUDA stream it names
            try:
                sid, index, dtype = (generic.__dict__[k].__get__(stream)
                                     for k in ("stream_id", "device_index", "device_type"))
                named = stream_base(stream_id=sid, device_index=index, device_type=dtype)
                return int(cuda_stream.__get__(named))
            except Exception:
                return None  # not a CUDA stream: nothing booked on it
        return None

    return EventPrimitives(current_stream=current, handle=handle, new_event=event_base,
                           record=event_base.record, wait=event_base.wait,
                           synchronize=event_base.synchronize, query=event_base.query)


WATCH = GpuWork()
