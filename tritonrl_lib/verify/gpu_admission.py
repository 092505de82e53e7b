"""Room on a GPU for large jobs: several side by side where their memory fits, one alone where asked.

A job whose task does not fit a worker's share of its GPU (limits.Budget.exclusive) asks the pool for
room (sandbox/messages.py, ExclusiveMessage): its device memory at its peak (`Budget.need_bytes`) and
the host memory its worker will hold for it (`Budget.host_need_bytes`: the reference outputs of the sets
it runs, and two outputs on their way). From that request on the pool hands no new job out on that GPU
(`Admission.reserved`) and grants waiting requests in the order they came (`admit`) while

- the device memory counted for the jobs there stays within the GPU's room, GPU_MEMORY_FRACTION of it
  (on the CPU the "GPU" is the host's share, limits.host_share_bytes, and its room the half a job alone
  may use, CPU_MEMORY_FRACTION): a granted job counts its need, a tenth more (ROOM_MARGIN) and its
  process's own (OVERHEAD: limits.CONTEXT_BYTES, the CUDA context and the libraries' workspaces, which
  every budget keeps apart from a job's need; on the CPU limits.HOST_BASE_BYTES); a job still running in
  a worker's share counts its share of the room;
- the host memory counted stays within HOST_REFERENCE_SHARE of the host's share: what one job alone on its
  GPU may hold today (the granted jobs' host needs with the same margin; a shared job its share of it).

The first request that does not fit stops the grants behind it (a later, smaller one never overtakes
it, so none waits for ever); one that fits nothing waits until nothing else runs there. A request
`alone` (a job that ran out of memory in its room, or in a worker's share, runs again with the whole
GPU: worker/job.py) is granted only when nothing else runs on its GPU, and nothing is granted beside it.

A job granted room runs with what it counted (`in_room`): its process's GPU memory fraction is its need,
margin and overhead over the GPU's memory (never more than GPU_MEMORY_FRACTION), and its worker holds no
more reference outputs than its host need says; so the jobs there together never take more than the
room. Timing is unaffected: every candidate's process of one GPU times alone under the GPU's lock
(sandbox/gpu_lock.py), large jobs beside each other as small ones.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Mapping, Sequence

from .sandbox import messages as M
from .sandbox.limits import (CONTEXT_BYTES, CPU_MEMORY_FRACTION, GPU_MEMORY_FRACTION, HOST_BASE_BYTES,
                             HOST_REFERENCE_SHARE, UNKNOWN_GPU_BYTES, UNKNOWN_HOST_BYTES, Budget)

# of a job's need, on top of it: memory_need is a model of the peak (tests/test_verify_budget.py holds it to
# the draws measured on the CPU), and the jobs beside it pay for its error, not only the job itself
ROOM_MARGIN = 0.1


@dataclasses.dataclass(frozen=True)
class Ask:
    """One job's request for room (ExclusiveMessage, as the pool reads it)."""

    need_bytes: int = 0  # device memory at its peak (the host's on the CPU)
    host_bytes: int = 0  # host memory of its worker for it
    alone: bool = False  # the whole GPU: nothing else may run there
    seq: int = 0  # the order of the requests: first come, first granted

    @classmethod
    def from_message(cls, msg: Mapping[str, Any], seq: int) -> Ask:
        need, host = _count(msg.get("need_bytes")), _count(msg.get("host_bytes"))
        # a request without its needs (none is sent so) can only have the GPU alone
        alone = bool(msg.get("alone", "need_bytes" not in msg))
        return cls(need, host, alone, seq)


@dataclasses.dataclass(frozen=True)
class Room:
    """What the jobs of one GPU (or of the host, on the CPU) may hold together."""

    device_bytes: float  # GPU_MEMORY_FRACTION of the GPU (CPU_MEMORY_FRACTION of the host's share)
    host_bytes: float  # HOST_REFERENCE_SHARE of the host's share
    overhead_bytes: float  # a process's own, beside its need (CONTEXT_BYTES; HOST_BASE_BYTES on the CPU)
    sharers: int = 1  # the workers there: a job in a worker's share counts 1/sharers of each room


def scope_room(device: str, total_bytes: int | None, host_total: int | None, sharers: int) -> Room:
    """The room of one GPU of `total_bytes` (on the CPU: the host's share) on a host's share of
    `host_total`, read as the jobs' budgets read them (limits.Budget.for_task)."""
    host = host_total or UNKNOWN_HOST_BYTES
    if device == "cuda":
        return Room(GPU_MEMORY_FRACTION * (total_bytes or UNKNOWN_GPU_BYTES), HOST_REFERENCE_SHARE * host,
                    CONTEXT_BYTES, max(1, sharers))
    return Room(CPU_MEMORY_FRACTION * (total_bytes or host), HOST_REFERENCE_SHARE * host, HOST_BASE_BYTES,
                max(1, sharers))


def counted(ask: Ask, room: Room) -> tuple[float, float]:
    """The device and host memory a granted job counts for: its needs, ROOM_MARGIN more, its process's own."""
    return ask.need_bytes * (1 + ROOM_MARGIN) + room.overhead_bytes, ask.host_bytes * (1 + ROOM_MARGIN)


def admit(waiting: Sequence[Ask], granted: Sequence[Ask], shared: int, room: Room) -> list[Ask]:
    """Which of the `waiting` requests of one GPU are granted now, beside the `granted` ones still running
    and `shared` jobs running in a worker's share: in the order they came, each while it fits the room
    (counted), the first that does not stopping the rest; one that fits nothing goes when nothing else
    runs there; one `alone` only then, and nothing beside it."""
    if any(g.alone for g in granted):
        return []
    device = sum(counted(g, room)[0] for g in granted) + shared * room.device_bytes / room.sharers
    host = sum(counted(g, room)[1] for g in granted) + shared * room.host_bytes / room.sharers
    running = len(granted) + shared
    out: list[Ask] = []
    for ask in sorted(waiting, key=lambda a: a.seq):
        d, h = counted(ask, room)
        fits = running == 0 or (not ask.alone and device + d <= room.device_bytes and host + h <= room.host_bytes)
        if not fits:
            break
        out.append(ask)
        if ask.alone:
            break
        device, host, running = device + d, host + h, running + 1
    return out


class Admission:
    """The pool's side: which workers' jobs wait for room on their GPU ("scope"), which have it."""

    def __init__(self, device: str, sharers: Mapping[str, int]):
        self.device = device
        self.sharers = dict(sharers)  # workers per scope
        self.asks: dict[int, tuple[str, Ask]] = {}  # worker slot -> (its scope, its request)
        self.granted: set[int] = set()
        self.rooms: dict[str, Room] = {}
        self.most_side_by_side = 0  # the most jobs granted room at once on one scope (for people, and tests)
        self._seq = itertools.count()

    def asked(self, slot: int, scope: str, msg: Mapping[str, Any]) -> None:
        """Worker `slot`'s job asks for room (ExclusiveMessage). A job asking again (to run alone after
        running out of memory) keeps its place in the order."""
        before = self.asks.get(slot)
        seq = before[1].seq if before is not None else next(self._seq)
        self.asks[slot] = (scope, Ask.from_message(msg, seq))
        self.granted.discard(slot)
        self.rooms[scope] = scope_room(self.device, _count(msg.get("total_bytes")) or None,
                                       _count(msg.get("host_total")) or None, self.sharers.get(scope, 1))

    def ended(self, slot: int) -> None:
        """Worker `slot`'s job ended (its result, or the worker lost): its room is free."""
        self.asks.pop(slot, None)
        self.granted.discard(slot)

    def waiting(self, slot: int) -> bool:
        """Whether worker `slot`'s job waits for room (its clock stands still meanwhile)."""
        return slot in self.asks and slot not in self.granted

    def reserved(self, scope: str) -> bool:
        """Whether no new job may be handed out on `scope`: a large job waits for room there or has it."""
        return any(s == scope for s, _ in self.asks.values())

    def to_grant(self, running: Mapping[int, str]) -> list[int]:
        """The slots whose requests are granted now (marked so here; the pool answers them), given every
        worker running a job: slot -> its scope."""
        out: list[int] = []
        for scope in sorted({s for s, _ in self.asks.values()}):
            mine = {slot: ask for slot, (s, ask) in self.asks.items() if s == scope}
            waiting = {ask.seq: slot for slot, ask in mine.items() if slot not in self.granted}
            if not waiting:
                continue
            shared = sum(1 for slot, s in running.items() if s == scope and slot not in self.asks)
            granted = [ask for slot, ask in mine.items() if slot in self.granted]
            for ask in admit([mine[slot] for slot in waiting.values()], granted, shared, self.rooms[scope]):
                self.granted.add(waiting[ask.seq])
                out.append(waiting[ask.seq])
            self.most_side_by_side = max(self.most_side_by_side, sum(1 for slot in mine if slot in self.granted))
        return out


# ---------------------------------------------------------------- the worker's side


def ask_message(budget: Budget, total_bytes: int | None, host_total: int | None,
                alone: bool = False) -> M.ExclusiveMessage:
    """A job's request for room (or, `alone`, for its whole GPU) from its budget; `total_bytes` and
    `host_total` are what the budget was made from (the GPU's memory, or the host's share on the CPU; the
    host's share)."""
    return M.ExclusiveMessage(type=M.EXCLUSIVE, need_bytes=int(budget.need_bytes),
                              host_bytes=int(budget.host_need_bytes), total_bytes=int(total_bytes or 0),
                              host_total=int(host_total or 0), alone=bool(alone))


def in_room(budget: Budget, device: str, total_bytes: int | None) -> Budget:
    """An exclusive job's budget in the room it asks for, rather than its whole GPU: the GPU memory
    fraction of its process from what it counts (its need, ROOM_MARGIN and CONTEXT_BYTES over the GPU's
    `total_bytes`, at most the whole GPU's fraction), the reference outputs its worker may hold from what
    its sets hold (ROOM_MARGIN more; never more than alone). The rest is the budget's."""
    fraction = budget.gpu_fraction
    if device == "cuda":
        mine = budget.need_bytes * (1 + ROOM_MARGIN) + CONTEXT_BYTES
        fraction = min(budget.gpu_fraction or GPU_MEMORY_FRACTION, mine / (total_bytes or UNKNOWN_GPU_BYTES))
    held = budget.reference_bytes
    if budget.held_bytes and budget.reference_bytes:
        held = min(budget.reference_bytes, int(budget.held_bytes * (1 + ROOM_MARGIN)))
    return dataclasses.replace(budget, gpu_fraction=fraction, reference_bytes=held)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0
