"""What a file is, by its bytes: the content hash that step fingerprints (run/state.py), SFT's data
fingerprint and a model's identity in evaluation records (eval/run.py) all use. A module of its own
below them, so none of them imports another for it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read a MiB at a time."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
