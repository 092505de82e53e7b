"""`env_set`: an environment variable set for the duration of a block (the Triton interpreter's
switch, its cache folder), then as it was."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def env_set(key: str, value: str) -> Iterator[None]:
    """`os.environ[key] = value` for the duration of the block, then as it was (unset included)."""
    before = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before
