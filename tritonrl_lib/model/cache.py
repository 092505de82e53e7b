"""The model cache (`$TRITONRL_CACHE`, else ~/.cache/tritonrl): its root, one builder per folder across
processes, and folders published whole. What the embedded model, the tiny model and stand-ins are
built into; and `ModelLoadError`, the error every loader raises with its fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class ModelLoadError(RuntimeError):
    """A model, adapter or quantisation request that cannot be satisfied; the message says why and how to fix it."""


def cache_root() -> Path:
    root = Path(os.environ.get("TRITONRL_CACHE", Path.home() / ".cache" / "tritonrl"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def build_lock(final: Path):
    """One builder per cache folder across processes (DDP ranks, parallel tests): the others wait,
    then find the folder built."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def publish(build_dir: Path, final: Path) -> Path:
    """Move a finished folder into place in one step, so no reader ever sees half of it."""
    build_dir.rename(final)
    return final
