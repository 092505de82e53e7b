"""Large blobs from a candidate's process to its worker as sealed memory files, not through the pipe.

A 34 MB output pushed through a pipe costs ~130 ms here (the kernel's pipe copies, a Python read
loop of 1 MB pieces, a second copy into the blob); written to a memfd it costs ~25 ms and the
worker maps it without copying. Trust does not change: the child creates the memfd, writes it,
then seals it against writing, shrinking and growing (F_SEAL_WRITE is refused by the kernel while
any writable mapping exists), and passes the descriptor over a datagram socket. The worker accepts
a descriptor only if those seals are on, so nobody, the candidate included, can change the bytes
after they were sent: the same guarantee the pipe gave (bytes once sent are the worker's). A disk
file, a tmpfs file or an unsealed memfd is refused.

The frame header names where each mapped blob goes among the frame's blobs: "mapped": [[position,
size], ...]; the descriptors are sent, in that order, before the frame itself, so they are waiting
when the worker reads it. Where memfds or sealing are missing (not Linux) blobs go inline.
"""

from __future__ import annotations

import array
import errno
import fcntl
import mmap
import os
import socket
import stat
from typing import Any, Callable

SHARE_MIN_BYTES = 1 << 20  # below this the pipe is as cheap
FD_TAG = b"m"
_SEALS = (getattr(fcntl, "F_SEAL_SHRINK", 0x2) | getattr(fcntl, "F_SEAL_GROW", 0x4)
          | getattr(fcntl, "F_SEAL_WRITE", 0x8))
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
_F_SEAL_SEAL = getattr(fcntl, "F_SEAL_SEAL", 0x1)


class MappedBlobError(ValueError):
    pass


def supported() -> bool:
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds")


def socket_pair() -> tuple[socket.socket, socket.socket] | None:
    """(worker end, child end) of the descriptor channel; None where memfds cannot be passed."""
    if not supported():
        return None
    try:
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    except OSError:
        return None


def sealed_copy(data: memoryview) -> int:
    """A new memfd holding `data`, sealed against any change; the caller owns the descriptor."""
    view = data.cast("B") if data.format != "B" or data.ndim != 1 else data
    return sealed_fill(view.nbytes, lambda dest: dest.__setitem__(slice(None), view)).fd


class SealedBlob:
    """A blob already in a sealed memfd of the sender's (`sealed_fill`); `send_blobs` passes the
    descriptor on and closes it."""

    def __init__(self, fd: int, nbytes: int):
        self.fd, self.nbytes = fd, nbytes

    def read(self) -> bytes:
        if not self.nbytes:
            return b""
        with mmap.mmap(self.fd, self.nbytes, prot=mmap.PROT_READ) as mm:
            return bytes(mm)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class BlankBlob:
    """A memfd of `nbytes` whose pages are already in memory and mapped writable, to be filled and
    sealed later (`seal`). Made ahead where waiting costs others: the fresh pages of ~200 MB of
    outputs take ~0.1 s to populate, which a candidate need not spend holding the GPU lock."""

    def __init__(self, nbytes: int, populate: bool = True):
        self.nbytes = nbytes
        self.mm: mmap.mmap | None = None
        self.fd = os.memfd_create("tritonrl-blob", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, nbytes)
            if nbytes:
                flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
                self.mm = mmap.mmap(self.fd, nbytes, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            self.close()
            raise

    def seal(self, fill: Callable[[memoryview], None]) -> SealedBlob:
        """`fill(view)` writes every byte straight into the pages (a device-to-host copy lands there
        without a second copy; the view must not outlive the call); then the file is sealed."""
        try:
            if self.mm is not None:
                with memoryview(self.mm) as view:
                    fill(view)
                self.mm.close()  # the writable mapping must be gone before F_SEAL_WRITE is accepted
                self.mm = None
            fcntl.fcntl(self.fd, _F_ADD_SEALS, _SEALS | _F_SEAL_SEAL)
        except BaseException:
            self.close()
            raise
        fd, self.fd = self.fd, -1
        return SealedBlob(fd, self.nbytes)

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def sealed_fill(nbytes: int, fill: Callable[[memoryview], None]) -> SealedBlob:
    """A new sealed memfd of `nbytes` whose bytes `fill(view)` writes straight into its pages."""
    return BlankBlob(nbytes).seal(fill)


def send_blobs(sock: socket.socket | None, blobs: list[Any]) -> tuple[list[Any], list[list[int]]]:
    """Send the large blobs as sealed memfds over `sock`; returns (blobs still to go inline,
    the frame's "mapped" list). Any blob that cannot be shared goes inline."""
    if sock is None:
        return [_inline(b) for b in blobs], []
    inline, mapped = [], []
    for pos, blob in enumerate(blobs):
        if not isinstance(blob, SealedBlob):
            view = memoryview(blob)
            if view.nbytes < SHARE_MIN_BYTES:
                inline.append(blob)
                continue
            try:
                blob = SealedBlob(sealed_copy(view), view.nbytes)
            except OSError:
                inline.append(blob)
                continue
        try:
            send_fds(sock, [blob.fd])
        except OSError:
            inline.append(_inline(blob))
            continue
        blob.close()
        mapped.append([pos, blob.nbytes])
    return inline, mapped


def _inline(blob: Any) -> Any:
    if isinstance(blob, SealedBlob):
        try:
            return blob.read()
        finally:
            blob.close()
    return blob


def receive_blobs(sock: socket.socket | None, header: dict[str, Any], inline: list[Any],
                  budget: int) -> list[Any]:
    """The frame's blobs in order: its inline ones with each announced mapped blob put in its
    position, read-only, after checking the descriptor's seals and size. At most `budget` bytes."""
    mapped = header.get("mapped")
    if not mapped:
        return inline
    total = len(inline) + len(mapped) if isinstance(mapped, list) else -1
    if sock is None or total < 0 or not all(
            isinstance(m, list) and len(m) == 2 and all(type(v) is int for v in m) and 0 <= m[0] < total
            and 0 <= m[1] for m in mapped) or len({m[0] for m in mapped}) != len(mapped):
        raise MappedBlobError("malformed mapped-blob list")
    if sum(m[1] for m in mapped) > budget:
        raise MappedBlobError(f"mapped blobs over the transfer limit of {budget >> 20} MiB")
    views: dict[int, memoryview] = {}
    for pos, size in mapped:
        views[pos] = _receive_one(sock, size)
    out, it = [], iter(inline)
    for pos in range(total):
        out.append(views[pos] if pos in views else next(it))
    return out


class ReceivedBlob(mmap.mmap):
    """A received blob's read-only mapping that keeps its sealed memfd open (closed with the
    mapping), so the worker can hand the very same file on (reference_cache.py) without copying."""

    sealed_fd = -1

    def __del__(self) -> None:
        if self.sealed_fd >= 0:
            try:
                os.close(self.sealed_fd)
            except OSError:
                pass
            self.sealed_fd = -1


def sealed_file(view: memoryview) -> int | None:
    """The sealed memfd a received blob's whole view maps (see ReceivedBlob), else None."""
    obj = getattr(view, "obj", None)
    if isinstance(obj, ReceivedBlob) and obj.sealed_fd >= 0 and view.nbytes == len(obj):
        return obj.sealed_fd
    return None


def _receive_one(sock: socket.socket, size: int) -> memoryview:
    try:
        msg, fds = recv_fds(sock, 1)
    except BlockingIOError:
        raise MappedBlobError("a mapped blob was announced but no descriptor was sent") from None
    except OSError as e:
        raise MappedBlobError(f"receiving a mapped blob failed: {e}") from None
    if not fds:
        raise MappedBlobError("a mapped blob arrived without a descriptor")
    for extra in fds[1:]:
        os.close(extra)
    fd = fds[0]
    if msg != FD_TAG:
        os.close(fd)
        raise MappedBlobError("unexpected message on the descriptor channel")
    return map_sealed(fd, size)


def check_sealed(fd: int, size: int) -> None:
    """Raise MappedBlobError unless `fd` is a memory file of `size` bytes sealed against any change."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise MappedBlobError("a mapped blob is not a memory file")
    try:
        seals = fcntl.fcntl(fd, _F_GET_SEALS)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise MappedBlobError("a mapped blob is not a sealable memory file") from None
        raise MappedBlobError(f"reading a mapped blob's seals failed: {e}") from None
    if seals & _SEALS != _SEALS:
        raise MappedBlobError("a mapped blob is not sealed against writing")
    if info.st_size != size:
        raise MappedBlobError(f"a mapped blob holds {info.st_size} bytes, {size} were announced")


def map_sealed(fd: int, size: int, populate: bool = True) -> memoryview:
    """A read-only view of the sealed memory file `fd` (checked: check_sealed), which the view's
    mapping owns from here on (a ReceivedBlob); closed here if it fails the check. `populate` maps
    every page now (what a comparison reads next); without it pages map as they are first read."""
    try:
        check_sealed(fd, size)
        if size == 0:
            return memoryview(b"")
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        mm = ReceivedBlob(fd, size, flags=flags, prot=mmap.PROT_READ)
        mm.sealed_fd, fd = fd, -1  # the mapping owns it now
        return memoryview(mm)
    finally:
        if fd >= 0:
            os.close(fd)


def drain(sock: socket.socket | None) -> None:
    """Close every descriptor still queued (sent for a frame that was never read)."""
    if sock is None:
        return
    while True:
        try:
            msg, fds = recv_fds(sock, 8)
        except OSError:
            return
        for fd in fds:
            os.close(fd)
        if not fds and not msg:
            return


def send_fds(sock: socket.socket, fds: list[int]) -> None:
    """One datagram carrying the descriptors `fds`."""
    socket.send_fds(sock, [FD_TAG], fds)


def recv_fds(sock: socket.socket, maxfds: int, wait: bool = False) -> tuple[bytes, list[int]]:
    """One datagram and the descriptors it carries; without waiting unless `wait` (socket.recv_fds
    of Python 3.11 drops its flags argument, so MSG_DONTWAIT would be ignored there)."""
    fds = array.array("i")
    msg, ancdata, _flags, _addr = sock.recvmsg(16, socket.CMSG_LEN(maxfds * fds.itemsize),
                                               0 if wait else socket.MSG_DONTWAIT)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return msg, list(fds)
