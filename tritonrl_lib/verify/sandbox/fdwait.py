"""Waiting on file descriptors with poll(2), never select(2): a worker holding its cached references'
memfds has descriptors numbered past 1024, which select() cannot watch (ValueError: filedescriptor
out of range), so every wait in the verifier goes through here."""

from __future__ import annotations

import select
from typing import Iterable

_READ = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITE = select.POLLOUT | select.POLLHUP | select.POLLERR


def wait_fds(read: Iterable[int] = (), write: Iterable[int] = (),
             timeout_s: float | None = None) -> tuple[list[int], list[int]]:
    """(readable, writable) among `read` and `write` once one is ready or `timeout_s` has passed (None:
    no limit). A descriptor whose other end closed counts as ready, as select() would say."""
    poller = select.poll()
    read, write = list(read), list(write)
    for fd in set(read) | set(write):
        poller.register(fd, (_READ if fd in read else 0) | (_WRITE if fd in write else 0))
    ms = None if timeout_s is None else max(0, int(timeout_s * 1000 + 0.999))
    events = dict(poller.poll(ms))
    readable = [fd for fd in read if events.get(fd, 0) & _READ]
    writable = [fd for fd in write if events.get(fd, 0) & _WRITE]
    return readable, writable
