"""The wire between a candidate's process and its worker: frames one way, answers the other.

Child -> worker: frames, each a 4-byte little-endian header length, a JSON header (with "blobs":
[byte lengths]) and the raw blobs (tensor bytes: never pickle, the child is untrusted). Blobs of
1 MiB and more travel as sealed memory files over a datagram socket beside the pipe
(shared_blobs.py); the header says where they go ("mapped"). The header's "type" is one of the
frame kinds of messages.py, which says what each carries.

Worker -> child: one byte per gate (`GO`, anything else or a closed pipe means stop), or a JSON
reply to a request (`REPLY_TAG`, a 4-byte length, the JSON).

`FrameReader` (the worker's end) checks every size it is told against a budget and raises
`ProtocolError` for bytes that are not a well-formed frame; `ChildChannel` is the child's end.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

from . import messages as M
from . import shared_blobs

# Frame: 4-byte little-endian header length, JSON header (with "blobs": [byte lengths]), the blobs.
LEN = struct.Struct("<I")
REPLY_TAG = b"R"  # worker -> child: a JSON reply (tag, 4-byte length, JSON); gate answers are one other byte
GO = b"G"  # worker -> child: the gate's answer "go on"
MAX_HEADER_BYTES = 4 << 20


class ProtocolError(RuntimeError):
    """The child sent bytes that are not a well-formed frame (or too many of them)."""



def encode_frame(header: dict[str, Any], blobs: list[memoryview | bytes] = ()) -> list[memoryview | bytes]:
    head = dict(header)
    head["blobs"] = [memoryview(b).nbytes for b in blobs]
    raw = json.dumps(head, separators=(",", ":")).encode()
    return [LEN.pack(len(raw)) + raw, *blobs]


def write_all(fd: int, parts: list[memoryview | bytes]) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            n = os.write(fd, view)
            view = view[n:]


class FrameReader:
    """Incremental parser of frames arriving on a pipe; validates every size it is told."""

    def __init__(self, max_total_bytes: int):
        self.max_total = max_total_bytes
        self.total = 0
        self._head = bytearray()
        self._header: dict[str, Any] | None = None
        self._sizes: list[int] = []
        self._blobs: list[bytearray] = []
        self._filled = 0  # bytes of the current (last) blob received so far

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], list[bytearray]]]:
        self.total += len(data)
        if self.total > self.max_total:
            raise ProtocolError(f"the candidate's process sent more than {self.max_total >> 20} MiB")
        view = memoryview(data)
        out = []
        while True:
            if self._header is None:
                if not view.nbytes:
                    return out
                view = self._read_header(view)
                if self._header is None:
                    return out
            while True:  # fill the blobs this header announced, one after another
                if self._blobs and self._filled < len(self._blobs[-1]):
                    cur = self._blobs[-1]
                    take = min(len(cur) - self._filled, view.nbytes)
                    if take == 0:
                        return out
                    cur[self._filled:self._filled + take] = view[:take]
                    self._filled += take
                    view = view[take:]
                elif len(self._blobs) < len(self._sizes):
                    self._blobs.append(bytearray(self._sizes[len(self._blobs)]))
                    self._filled = 0
                else:
                    break
            out.append(self._emit())

    def _read_header(self, view: memoryview) -> memoryview:
        if len(self._head) < LEN.size:
            take = min(LEN.size - len(self._head), view.nbytes)
            self._head += view[:take]
            view = view[take:]
            if len(self._head) < LEN.size:
                return view
            (n,) = LEN.unpack_from(self._head)
            if n > MAX_HEADER_BYTES:
                raise ProtocolError(f"frame header of {n} bytes")
        need = LEN.size + LEN.unpack_from(self._head)[0] - len(self._head)
        take = min(need, view.nbytes)
        self._head += view[:take]
        view = view[take:]
        if take < need:
            return view
        try:
            header = json.loads(bytes(self._head[LEN.size:]))
        except ValueError as e:
            raise ProtocolError(f"frame header is not JSON: {e}") from None
        sizes = header.get("blobs") if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(type(s) is int and 0 <= s for s in sizes):
            raise ProtocolError("frame header without valid blob sizes")
        if self.total - view.nbytes + sum(sizes) > self.max_total:
            raise ProtocolError(f"the candidate's process sent more than {self.max_total >> 20} MiB")
        self._header, self._sizes, self._blobs, self._filled = header, sizes, [], 0
        return view

    def _emit(self) -> tuple[dict[str, Any], list[bytearray]]:
        out = (self._header, self._blobs)
        self._head = bytearray()
        self._header, self._sizes, self._blobs, self._filled = None, [], [], 0
        return out  # type: ignore[return-value]

    @property
    def mid_frame(self) -> bool:
        return bool(self._head) or self._header is not None


def _header_encoder() -> Any:
    """`json.dumps(header, separators=(",", ":"))` as one C object made now: nothing it calls is looked up
    in a module at encoding time (json.dumps reads `json.JSONEncoder`, `json.encoder.c_make_encoder`, ...
    when called), so a candidate that rebinds them cannot rewrite a frame. Falls back to an encoder
    object where the C accelerator is missing."""
    from json import encoder as json_encoder

    make, escape = json_encoder.c_make_encoder, json_encoder.c_encode_basestring_ascii
    if make is None or escape is None:
        return json.JSONEncoder(separators=(",", ":")).encode
    iterencode = make(None, _not_json, escape, None, ":", ",", False, False, True)
    join = "".join
    return lambda obj: join(iterencode(obj, 0))


def _not_json(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class ChildChannel:
    """The child's end: framed messages to the worker, one-byte gate answers back. Blobs of 1 MiB
    and more travel as sealed memory files over `blob_sock` where there is one (shared_blobs.py).

    Every frame goes out through functions bound here, when the process starts (before any candidate
    code exists): rebinding `json.dumps`, `os.write` or this module's helpers later changes nothing
    sent. Once the guard is in, `integrity` (guard.Guard.tampered) is asked before every frame: a
    namespace the verifier's code relies on that changed goes to the worker first, as a "tampered"
    frame (a cheat flag). A channel descriptor swapped under this process (os.dup2 onto it, to read
    and rewrite frames before they reach the worker) ends the process at once."""

    def __init__(self, out_fd: int, in_fd: int, blob_sock: Any = None):
        self.out_fd, self.in_fd = out_fd, in_fd
        self.blob_sock = blob_sock
        self.integrity: Any = None  # () -> names of tampered namespaces; set when the guard is installed
        self._encode, self._pack, self._write, self._len = _header_encoder(), LEN.pack, os.write, len
        self._send_blobs, self._fstat, self._exit = shared_blobs.send_blobs, os.fstat, os._exit
        self._tampered_kind = M.TAMPERED  # bound too: its own frame must not read a kind the candidate rebound
        self._ends = tuple(self._identity(fd) for fd in (out_fd, in_fd))

    def _identity(self, fd: int) -> tuple[int, int]:
        st = self._fstat(fd)
        return st.st_dev, st.st_ino

    def send(self, header: dict[str, Any], blobs: list[memoryview | bytes] = ()) -> None:
        if self._ends != (self._identity(self.out_fd), self._identity(self.in_fd)):
            self._exit(70)  # the worker sees the process end without a result
        check = self.integrity
        if check is not None:
            changed = check()
            if changed:
                self._write_frame({"type": self._tampered_kind, "namespaces": changed[:20]}, ())
        inline, mapped = self._send_blobs(self.blob_sock, list(blobs))
        if mapped:
            header = {**header, "mapped": mapped}
        self._write_frame(header, inline)

    def _write_frame(self, header: dict[str, Any], inline: Any) -> None:
        head = dict(header)
        head["blobs"] = [memoryview(b).nbytes for b in inline]
        raw = self._encode(head).encode()
        write, fd = self._write, self.out_fd
        for part in (self._pack(self._len(raw)) + raw, *inline):
            view = memoryview(part).cast("B")
            while view.nbytes:
                view = view[write(fd, view):]

    def gate(self, stage: str) -> bool:
        """Ask the worker whether to go on after `stage`; False (or a closed pipe) means stop."""
        self.ask(stage)
        return self.answer()

    def ask(self, stage: str) -> None:
        """The gate's question alone: the worker judges what came before it while this process
        goes on with work that sends nothing (it ends this process at once if that judgement fails)."""
        self.send({"type": M.GATE, "stage": stage})

    def answer(self) -> bool:
        """The worker's answer to the last `ask`: True to go on."""
        try:
            answer = os.read(self.in_fd, 1)
        except OSError:
            return False
        return answer == GO

    def request(self, header: dict[str, Any]) -> dict[str, Any] | None:
        """Send `header` and wait for the worker's JSON reply; None if there is none."""
        self.send(header)
        try:
            if self._read_exactly(1) != REPLY_TAG:
                return None
            (n,) = LEN.unpack(self._read_exactly(LEN.size))
            reply = json.loads(self._read_exactly(n))
        except (OSError, ValueError, struct.error):
            return None
        return reply if isinstance(reply, dict) else None

    def _read_exactly(self, n: int) -> bytes:
        return read_exactly(self.in_fd, n)


def read_exactly(fd: int, n: int) -> bytes:
    """`n` bytes from `fd`; OSError if it closes first."""
    out = bytearray()
    while len(out) < n:
        part = os.read(fd, n - len(out))
        if not part:
            raise OSError("the worker closed the channel")
        out += part
    return bytes(out)


def send_reply(fd: int, reply: dict[str, Any]) -> None:
    """The worker's JSON reply to a child's request."""
    raw = json.dumps(reply).encode()
    write_all(fd, [REPLY_TAG + LEN.pack(len(raw)) + raw])


def with_mapped(sock: Any, header: dict[str, Any], inline: list[Any], reader: FrameReader) -> list[Any]:
    """The frame's blobs with its memfd-passed ones in place, counted against the transfer limit."""
    if not header.get("mapped"):
        return inline
    try:
        blobs = shared_blobs.receive_blobs(sock, header, inline, reader.max_total - reader.total)
    except shared_blobs.MappedBlobError as e:
        raise ProtocolError(str(e)) from None
    reader.total += sum(m[1] for m in header["mapped"])
    return blobs
